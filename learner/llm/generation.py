"""LLM generation: the reasoning part a :class:`~learner.rollout.workers.RolloutWorker` hosts.

Samples ``rollout.n`` completions per prompt with the configured engine (``learner.llm.rollout``:
``hf``, ``vllm``, ``sglang``), or multi-turn tool-using episodes when ``agent.enabled``, in
micro-batches that go to the reward side's channel as soon as each is ready. The embodied
counterpart is :class:`learner.rollout.embodied.PolicySampler`; the worker is the same.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Sequence
from typing import Any

import torch

from learner.llm.agentic import run_episodes
from learner.llm.agentic.training import episode_metrics
from learner.llm.datasets import apply_template
from learner.llm.model import build_model
from learner.llm.rewards import combine
from learner.llm.rollout import ROLLOUT_BACKENDS, RolloutBatch, SamplingParams
from learner.llm.tokenizer import load_tokenizer
from learner.roles import weights_digest

__all__ = ["LLMGeneration"]


def _build_backend(cfg: Any, tokenizer_dir: str) -> Any:
    tok = load_tokenizer(tokenizer_dir)
    backend_cls = ROLLOUT_BACKENDS.get(cfg.rollout.backend)
    if cfg.rollout.backend == "hf":
        model = build_model(cfg.model, tok)
        if hasattr(model, "merge_and_unload"):  # rollout serves merged weights, never adapters
            model = model.merge_and_unload()
        return backend_cls(model, tok, device="cuda" if torch.cuda.is_available() else "cpu")
    return backend_cls.from_config(cfg, tokenizer_dir)  # type: ignore[attr-defined]  # engine backends define from_config; the base class does not


class LLMGeneration:
    """An engine plus the sampling settings of ``rollout`` (seeded per rank) and the tools."""

    def __init__(self, cfg: Any, tokenizer_dir: str, rank: int = 0, world_size: int = 1) -> None:
        self.cfg = cfg
        self.timeout = cfg.train.timeout_s
        self.backend = _build_backend(cfg, tokenizer_dir)
        self.tokenizer = self.backend.tokenizer
        r = cfg.rollout
        self.params = SamplingParams(
            n=r.n,
            temperature=r.temperature,
            top_p=r.top_p,
            top_k=r.top_k,
            max_new_tokens=r.max_new_tokens,
            seed=cfg.train.seed + rank,
        )
        # backends seed their sampler from ``params.seed`` on every call (as vLLM's per-request
        # seed does): one fixed seed would draw the same noise at every step, and a policy whose
        # rare right answers need the tail of a token distribution would never sample them
        self._seeds = random.Random(1_000_003 * cfg.train.seed + rank)
        self.tools = None
        if (
            cfg.agent.enabled
        ):  # the tool worker lives beside the engine: observations go straight back
            from learner.llm.tools import ToolWorker

            self.tools = ToolWorker(
                cfg.agent.tools, cfg.agent.tool_timeout_s, options=cfg.agent.tool_options
            )

    @property
    def weight_version(self) -> int:
        return self.backend.weight_version

    def load_weights(self, state: dict[str, torch.Tensor], version: int) -> None:
        self.backend.update_weights(state, version)

    def onload(self) -> None:
        self.backend.onload()

    def offload(self) -> None:
        self.backend.offload()

    def digest(self) -> str:
        return weights_digest(self.backend.model)

    def _sample(self, prompts: Sequence[str], params: SamplingParams) -> RolloutBatch:
        """Single-turn samples, or multi-turn tool-using episodes when ``agent.tools`` is set."""
        d = self.cfg.data
        texts = [
            apply_template(self.tokenizer, p, d.prompt_format, d.system_prompt) for p in prompts
        ]
        if self.tools is None:
            return self.backend.generate(texts, params)
        ids = [list(self.tokenizer(t, add_special_tokens=False).input_ids) for t in texts]
        return run_episodes(self.backend, ids, params, self.tools, self.cfg.agent)

    def run_iteration(
        self,
        prompts: Sequence[str],
        answers: Sequence[str],
        out: Any = None,
        key: Any = None,
        first_index: int = 0,
    ) -> RolloutBatch | int:
        """Sample ``n`` responses per prompt in micro-batches; each goes to ``out`` (a channel,
        under ``key``) as soon as it is ready (returns their count), or all are returned
        together when ``out`` is None."""
        mb = self.cfg.rollout.micro_batch_prompts or len(prompts)
        batches = []
        for s in range(0, len(prompts), mb):
            t0 = time.perf_counter()
            params = dataclasses.replace(self.params, seed=self._seeds.getrandbits(31))
            b = self._sample(prompts[s : s + mb], params)
            b.prompt_index = [first_index + s + i for i in b.prompt_index]
            b.extra["answers"] = [answers[i - first_index] for i in b.prompt_index]
            b.extra["t_generate"] = time.perf_counter() - t0
            if out is not None:
                out.put(b, key=key, timeout=self.timeout)
            else:
                batches.append(b)
        if out is not None:
            return -(-len(prompts) // mb)
        merged = RolloutBatch.concat(batches) if len(batches) > 1 else batches[0]
        merged.extra["t_generate"] = sum(b.extra["t_generate"] for b in batches)
        return merged

    def evaluate(self, prompts: Sequence[str], answers: Sequence[str]) -> dict[str, float]:
        """Greedy accuracy (first reward of ``reward.weights`` > 0.5) on held-out prompts."""
        greedy = SamplingParams(
            n=1, temperature=0.0, max_new_tokens=self.cfg.rollout.max_new_tokens
        )
        b = self._sample(prompts, greedy)
        name = next(iter(self.cfg.reward.weights))
        scores = combine({name: 1.0}, b.extra.get("final_texts", b.texts), list(answers))
        return {
            "eval/accuracy": sum(s > 0.5 for s in scores) / len(scores),
            "eval/weight_version": b.weight_version,
            **episode_metrics(b.extra, "eval"),
        }
