"""``sglang`` rollout backend (GPU): SGLang ``Engine`` with tensor weight updates.

SGLang is imported lazily. Pure parts (sampling-params mapping, output parsing, request
grouping) are tested without it. Every sample is its own request (prompts repeated ``n``
times, groups kept contiguous); weights go through ``Engine.update_weights_from_tensor`` in
bounded chunks; collocated runs free memory with ``release_memory_occupation``.
"""

from __future__ import annotations

import logging
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

__all__ = ["SGLangRolloutBackend", "sglang_sampling_params", "sglang_outputs_to_lists"]

log = logging.getLogger(__name__)


def sglang_sampling_params(params: SamplingParams) -> dict[str, Any]:
    """Our SamplingParams -> SGLang's ``sampling_params`` dict (``top_k=-1`` is off).

    >>> params = SamplingParams(max_new_tokens=8, stop_token_ids=(2,))
    >>> sglang_sampling_params(params)["stop_token_ids"]
    [2]
    """
    sp: dict[str, Any] = {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
        "max_new_tokens": params.max_new_tokens,
        "skip_special_tokens": True,
    }
    if params.stop_token_ids:
        sp["stop_token_ids"] = list(params.stop_token_ids)
    if params.seed is not None:
        sp["sampling_seed"] = params.seed
    if params.stop:  # multi-turn tools: stop at a closing tag and keep it in the text
        sp["stop"] = list(params.stop)
        sp["no_stop_trim"] = True
    return sp


def sglang_outputs_to_lists(
    outputs: Sequence[dict[str, Any]],
) -> tuple[list[list[int]], list[list[float]], list[str], list[str]]:
    """Engine outputs -> (response ids, log-probs, texts, finish reasons).

    With ``return_logprob=True`` each output's ``meta_info["output_token_logprobs"]`` is a
    list of ``(logprob, token_id, text_or_None)``; ids come from there, so they are exact.
    """
    ids, lps, texts, reasons = [], [], [], []
    for out in outputs:
        meta = out.get("meta_info", {})
        triples = meta.get("output_token_logprobs") or []
        ids.append([int(t[1]) for t in triples] if triples else list(out.get("output_ids", [])))
        lps.append([float(t[0]) for t in triples])
        texts.append(out.get("text", ""))
        reasons.append(finish_reason(meta.get("finish_reason")))
    return ids, lps, texts, reasons


@ROLLOUT_BACKENDS.register("sglang")
class SGLangRolloutBackend(EngineRolloutBackend):
    """SGLang ``Engine`` in this process (one rollout worker = one engine)."""

    def __init__(self, spec: EngineSpec, tokenizer: Any) -> None:
        try:
            import sglang
        except ImportError as e:
            raise ImportError(
                "rollout.backend=sglang needs SGLang on a CUDA machine: pip install "
                "'sglang[all]' (or use rollout.backend=hf on a CPU)"
            ) from e
        super().__init__(spec, tokenizer)
        self.engine = sglang.Engine(
            model_path=spec.model_path,
            tp_size=spec.tensor_parallel,
            dtype=spec.dtype,
            mem_fraction_static=spec.gpu_memory_utilization,
            enable_memory_saver=True,
        )

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        for chunk in weight_chunks(state_dict):
            self.engine.update_weights_from_tensor(named_tensors=chunk)
        self.engine.flush_cache()
        self.weight_version = int(version)

    def offload(self) -> None:
        self.engine.release_memory_occupation()

    def onload(self) -> None:
        self.engine.resume_memory_occupation()

    def generate_ids(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams
    ) -> RolloutBatch:
        """Token-id prompts (multi-turn contexts) straight to the engine as ``input_ids``."""
        sp = sglang_sampling_params(params)
        p_ids, r_ids, lps, texts, reasons, index = [], [], [], [], [], []
        for batch in request_batches(prompt_ids, params.n, self.max_requests, expand_samples=True):
            outs = self.engine.generate(
                input_ids=[ids for _, ids in batch], sampling_params=sp, return_logprob=True
            )
            ids, lp, tx, why = sglang_outputs_to_lists(outs)
            p_ids += [ids_ for _, ids_ in batch]
            r_ids += ids
            lps += lp
            texts += tx
            reasons += why
            index += [i for i, _ in batch]
        return RolloutBatch(p_ids, r_ids, lps, texts, reasons, index, self.weight_version)
