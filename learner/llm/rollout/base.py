"""The one rollout-backend interface (hf, vllm, sglang) and the messages it returns.

A backend turns prompts into sampled responses with per-token log-probs, and accepts new
weights from the actor. Everything crossing a worker boundary is plain Python lists (token
ids, floats), so a :class:`RolloutBatch` pickles cheaply through Ray channels and means the
same thing whichever engine produced it.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlinf_contracts.registry import Registry

__all__ = ["SamplingParams", "RolloutBatch", "RolloutBackend", "ROLLOUT_BACKENDS"]


@dataclass(frozen=True)
class SamplingParams:
    """Engine-neutral sampling settings; each backend maps them onto its own API."""

    n: int = 1  # samples per prompt (GRPO group size)
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 disables
    max_new_tokens: int = 16
    stop_token_ids: tuple[int, ...] = ()  # in addition to the tokenizer's EOS
    seed: int | None = None
    stop: tuple[str, ...] = ()  # stop strings (kept in the output), e.g. a tool's closing tag

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"SamplingParams.n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(
                f"SamplingParams.max_new_tokens must be >= 1, got {self.max_new_tokens}"
            )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class RolloutBatch:
    """Samples for a list of prompts; sample ``i`` answers prompt ``prompt_index[i]``.

    The ``n`` samples of one prompt are contiguous (the layout group advantages expect).
    ``logprobs[i][t]`` is the log-probability of ``response_ids[i][t]`` under the sampling
    distribution (after temperature / top-p), i.e. the behaviour policy.
    """

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    logprobs: list[list[float]]
    texts: list[str]
    finish_reasons: list[str]  # "stop" (EOS / stop token) or "length"
    prompt_index: list[int]
    weight_version: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # references, timings, ...

    def __len__(self) -> int:
        return len(self.response_ids)

    @property
    def num_tokens(self) -> int:
        return sum(len(r) for r in self.response_ids)

    def select(self, indices: Sequence[int]) -> RolloutBatch:
        """Sub-batch of samples ``indices`` (e.g. the groups kept by dynamic sampling)."""
        idx = list(indices)
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        extra = {
            k: pick(v) if isinstance(v, list) and len(v) == len(self) else v
            for k, v in self.extra.items()
        }
        return RolloutBatch(
            pick(self.prompt_ids),
            pick(self.response_ids),
            pick(self.logprobs),
            pick(self.texts),
            pick(self.finish_reasons),
            pick(self.prompt_index),
            self.weight_version,
            extra,
        )

    @staticmethod
    def concat(batches: Sequence[RolloutBatch]) -> RolloutBatch:
        """Join micro-batches; prompt indices are kept as they are (they index the caller's
        prompts)."""
        if not batches:
            raise ValueError("RolloutBatch.concat needs at least one batch")
        out = RolloutBatch([], [], [], [], [], [], min(b.weight_version for b in batches), {})
        for b in batches:
            out.prompt_ids += b.prompt_ids
            out.response_ids += b.response_ids
            out.logprobs += b.logprobs
            out.texts += b.texts
            out.finish_reasons += b.finish_reasons
            out.prompt_index += b.prompt_index
            for k, v in b.extra.items():
                if isinstance(v, list):
                    out.extra.setdefault(k, []).extend(v)
        return out


class RolloutBackend(abc.ABC):
    """Generation engine contract: sample, take weights, free memory between phases."""

    weight_version: int = 0

    @abc.abstractmethod
    def generate(self, prompts: Sequence[str], params: SamplingParams) -> RolloutBatch:
        """Sample ``params.n`` responses per prompt (text prompts, already templated)."""

    def generate_ids(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams
    ) -> RolloutBatch:
        """Sample from token-id prompts (multi-turn episodes continue from ids, never
        re-tokenized)."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot continue from token ids (needed by agent.tools)"
        )

    @abc.abstractmethod
    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Load the actor's weights (full state dict, HF parameter names) as ``version``."""

    def offload(self) -> None:  # noqa: B027  # a no-op default, not abstract: CPU backends keep it
        """Release accelerator memory while another component (the actor) trains. No-op on CPU."""

    def onload(self) -> None:  # noqa: B027  # a no-op default, not abstract: CPU backends keep it
        """Take accelerator memory back before the next generation. No-op on CPU."""


ROLLOUT_BACKENDS: Registry[type[RolloutBackend]] = Registry("rollout backend")
