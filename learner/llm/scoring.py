"""Scoring completions: the reasoning part an :class:`~learner.rollout.workers.EnvWorker` hosts.

Where an embodied env answers actions with observations and rewards, the reasoning "env"
answers completions with scores: the weighted reward functions of ``reward.weights``
(``learner.llm.rewards``), on the final answer of an agentic episode plus its per-turn rewards.
"""

from __future__ import annotations

import time
from typing import Any

from learner.llm.agentic.training import episode_scores
from learner.llm.rewards import combine
from learner.llm.rollout import RolloutBatch

__all__ = ["Scorer"]


class Scorer:
    """Scores rollout micro-batches in place (``outcome``, ``scores``, ``t_reward`` in extra)."""

    spec = None  # no env spec: the prompts are the observations

    def __init__(self, cfg: Any, rank: int = 0, world_size: int = 1) -> None:
        self.cfg = cfg

    def score(self, batch: RolloutBatch) -> RolloutBatch:
        t0 = time.perf_counter()
        # agentic episodes: the outcome is judged on the final answer, plus the per-turn rewards
        outcome = combine(
            self.cfg.reward.weights,
            batch.extra.get("final_texts", batch.texts),
            batch.extra["answers"],
        )
        batch.extra["outcome"] = outcome
        batch.extra["scores"] = episode_scores(outcome, batch.extra.get("turn_rewards"))
        batch.extra["t_reward"] = time.perf_counter() - t0
        return batch

    def run_iteration(self, inp: Any, out: Any, key: Any, count: int) -> int:
        """Move ``count`` micro-batches of ``key`` from ``inp`` to ``out``, scoring each."""
        timeout = self.cfg.train.timeout_s
        for _ in range(count):
            out.put(self.score(inp.get(key=key, timeout=timeout)), key=key, timeout=timeout)
        return count
