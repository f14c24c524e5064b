"""The agentic parts of a training step: masked demonstrations, episode scores, per-turn rewards.

Pure functions of token ids, texts and tensors, used by the reasoning runner's workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from learner.llm.agentic.protocol import split_segments

__all__ = ["encode_demo", "episode_scores", "turn_reward_tensor", "episode_metrics"]


def encode_demo(tokenizer: Any, response: str, eos_id: int) -> tuple[list[int], list[int]]:
    """``(ids, loss_mask)`` of a demonstration's response: tool observations are encoded as the
    runner appends them (separately) and masked out, as in a rollout; EOS is a model token."""
    ids: list[int] = []
    mask: list[int] = []
    for seg, model in split_segments(response):
        seg_ids = list(tokenizer(seg, add_special_tokens=False).input_ids)
        ids += seg_ids
        mask += [int(model)] * len(seg_ids)
    return ids + [eos_id], mask + [1]


def episode_scores(
    outcome: Sequence[float], turn_rewards: Sequence[Sequence[tuple[int, float]]] | None
) -> list[float]:
    """Episode return: outcome reward plus every per-turn reward (what outcome estimators see)."""
    if turn_rewards is None:
        return list(outcome)
    return [o + sum(r for _, r in t) for o, t in zip(outcome, turn_rewards)]


def turn_reward_tensor(
    turn_rewards: Sequence[Sequence[tuple[int, float]]], width: int
) -> torch.Tensor:
    """``[N, width]`` dense per-turn rewards, each on its turn's last model token (token-level
    estimators)."""
    out = torch.zeros(len(turn_rewards), width)
    for i, rows in enumerate(turn_rewards):
        for t, r in rows:
            out[i, t] += r
    return out


def episode_metrics(extra: dict[str, Any], prefix: str = "rollout") -> dict[str, float]:
    """Tool-use statistics of a batch of episodes (empty for single-turn batches)."""
    if "turns" not in extra:
        return {}
    calls, turns, errors = extra["tool_calls"], extra["turns"], extra["tool_errors"]
    n = max(1, len(calls))
    return {
        f"{prefix}/tool_rate": sum(c > 0 for c in calls) / n,
        f"{prefix}/tool_calls": sum(calls) / n,
        f"{prefix}/turns": sum(turns) / n,
        f"{prefix}/tool_errors": sum(errors) / max(1, sum(calls)),
    }
