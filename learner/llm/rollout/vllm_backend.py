"""``vllm`` rollout backend (GPU): sampling-params mapping, batching, in-place weight updates.

vLLM is imported lazily; without it (or without a GPU) construction fails with a clear
message. The mapping and output parsing are pure functions tested without vLLM. Weight updates
call the engine model's ``load_weights`` on renamed, chunked tensors (the path vLLM's own RLHF
examples use); collocated runs free memory with ``LLM.sleep`` / ``LLM.wake_up``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from learner.llm.rollout.base import ROLLOUT_BACKENDS, RolloutBatch, SamplingParams
from learner.llm.rollout.engine_common import (
    EngineRolloutBackend,
    EngineSpec,
    finish_reason,
    request_batches,
    weight_chunks,
)

__all__ = ["VLLMRolloutBackend", "vllm_sampling_kwargs", "vllm_outputs_to_lists"]

log = logging.getLogger(__name__)


def vllm_sampling_kwargs(params: SamplingParams) -> dict[str, Any]:
    """Our SamplingParams -> ``vllm.SamplingParams(**kwargs)``.

    ``logprobs=0`` asks for the log-prob of each sampled token only; vLLM's ``top_k=-1`` means off;
    ``max_tokens`` is vLLM's name for the response length.

    >>> vllm_sampling_kwargs(SamplingParams(n=4, temperature=0.7, max_new_tokens=32))["top_k"]
    -1
    """
    kw: dict[str, Any] = {
        "n": params.n,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
        "max_tokens": params.max_new_tokens,
        "logprobs": 0,
        "seed": params.seed,
        "skip_special_tokens": True,
    }
    if params.stop_token_ids:
        kw["stop_token_ids"] = list(params.stop_token_ids)
    if params.stop:  # multi-turn tools: stop at a closing tag and keep it in the text
        kw["stop"] = list(params.stop)
        kw["include_stop_str_in_output"] = True
    return kw


def vllm_outputs_to_lists(
    outputs: Sequence[Any],
) -> tuple[list[list[int]], list[list[int]], list[list[float]], list[str], list[str]]:
    """``RequestOutput`` list -> (prompt ids, response ids, log-probs, texts, finish reasons), one
    row per sample, samples of a request contiguous. ``logprobs[t]`` is vLLM's ``{token_id:
    Logprob}`` dict at step ``t``; we read the sampled token's entry."""
    p_ids, r_ids, lps, texts, reasons = [], [], [], [], []
    for req in outputs:
        for comp in req.outputs:
            toks = list(comp.token_ids)
            steps = comp.logprobs or [{} for _ in toks]
            lp = [_sampled_logprob(step, t) for t, step in zip(toks, steps)]
            p_ids.append(list(req.prompt_token_ids))
            r_ids.append(toks)
            lps.append(lp)
            texts.append(comp.text)
            reasons.append(finish_reason(comp.finish_reason))
    return p_ids, r_ids, lps, texts, reasons


def _sampled_logprob(step: dict[int, Any], token: int) -> float:
    entry = step.get(token) if step else None
    if entry is None:
        return float("nan")  # engine returned no log-prob for it: never silently 0
    return float(getattr(entry, "logprob", entry))


@ROLLOUT_BACKENDS.register("vllm")
class VLLMRolloutBackend(EngineRolloutBackend):
    """vLLM ``LLM`` engine in this process (one rollout worker = one engine)."""

    def __init__(
        self,
        spec: EngineSpec,
        tokenizer: Any,
        max_model_len: int | None = None,
        enable_sleep: bool = True,
    ) -> None:
        try:
            import vllm
        except ImportError as e:
            raise ImportError(
                "rollout.backend=vllm needs vLLM on a CUDA machine: pip install vllm "
                "(or use rollout.backend=hf on a CPU)"
            ) from e
        # weights are pushed into the engine's model object, so it must live in this process
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        super().__init__(spec, tokenizer)
        self._vllm = vllm
        self.llm = vllm.LLM(
            model=spec.model_path,
            tensor_parallel_size=spec.tensor_parallel,
            dtype=spec.dtype,
            gpu_memory_utilization=spec.gpu_memory_utilization,
            max_model_len=max_model_len,
            enable_sleep_mode=enable_sleep,
        )
        self._sleep_ok = enable_sleep

    @classmethod
    def config_extras(cls, cfg: Any) -> dict[str, Any]:
        return {"max_model_len": cfg.model.max_position}

    def _engine_model(self) -> Any:
        engine = self.llm.llm_engine
        for path in (
            "model_executor.driver_worker.worker.model_runner.model",
            "model_executor.driver_worker.model_runner.model",
        ):
            obj: Any = engine
            try:
                for attr in path.split("."):
                    obj = getattr(obj, attr)
                return obj
            except AttributeError:
                continue
        raise RuntimeError(
            "cannot reach the vLLM model for in-place weight updates; set "
            "VLLM_ENABLE_V1_MULTIPROCESSING=0 before the engine starts"
        )

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        model = self._engine_model()
        for chunk in weight_chunks(state_dict):
            model.load_weights(weights=[(n, t.to("cuda", non_blocking=True)) for n, t in chunk])
        self.llm.reset_prefix_cache()  # cached KV of old weights must not be reused
        self.weight_version = int(version)

    def offload(self) -> None:
        if self._sleep_ok:
            self.llm.sleep(level=1)

    def onload(self) -> None:
        if self._sleep_ok:
            self.llm.wake_up()

    def generate_ids(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams
    ) -> RolloutBatch:
        """Token-id prompts (multi-turn contexts) straight to the engine as ``prompt_token_ids``."""
        sp = self._vllm.SamplingParams(**vllm_sampling_kwargs(params))
        rows: list[Any] = [[], [], [], [], []]
        index: list[int] = []
        for batch in request_batches(prompt_ids, params.n, self.max_requests):
            reqs = [{"prompt_token_ids": ids} for _, ids in batch]
            outs = self.llm.generate(reqs, sp, use_tqdm=False)
            for part, acc in zip(vllm_outputs_to_lists(outs), rows):
                acc.extend(part)
            index.extend(i for i, _ in batch for _ in range(params.n))
        return RolloutBatch(rows[0], rows[1], rows[2], rows[3], rows[4], index, self.weight_version)
