"""Reward-function registry: ``reward.name: math`` in a config picks a scorer by string.

A reward function maps one response and its reference answer to a float score. Keeping the
signature this small (text in, float out, no model state) lets the reward worker group score
micro-batches in parallel processes and lets tests pin every tricky case to a number.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from rlinf_contracts.registry import Registry

__all__ = ["REWARDS", "RewardFn", "score_batch", "combine"]


class RewardFn(Protocol):
    def __call__(self, response: str, reference: str, **kwargs: Any) -> float: ...


REWARDS: Registry[Callable[..., float]] = Registry("reward function")


def score_batch(
    name: str, responses: Sequence[str], references: Sequence[str], **kwargs: Any
) -> list[float]:
    """Score each ``(response, reference)`` pair with the reward registered as ``name``."""
    if len(responses) != len(references):
        raise ValueError(
            f"reward {name!r}: {len(responses)} responses but {len(references)} references; "
            "pass one reference per response (repeat a prompt's reference for each sample)"
        )
    fn = REWARDS.get(name)
    return [float(fn(r, ref, **kwargs)) for r, ref in zip(responses, references)]


def combine(
    weights: dict[str, float], responses: Sequence[str], references: Sequence[str]
) -> list[float]:
    """Weighted sum of several registered rewards, e.g. ``{"exact_match": 1, "format": 0.1}``."""
    total = [0.0] * len(responses)
    for name, w in weights.items():
        for i, s in enumerate(score_batch(name, responses, references)):
            total[i] += w * s
    return total
