"""``train.time_budget_s``: one wall-clock bound on training, final checkpoint and final eval.

The clock starts when the runner starts (the process start-up before it, a few seconds, is not
counted). Training stops early enough to leave the final evaluation its estimated time (from
the measured cost of a policy step in the rollouts); the evaluation then stops starting new
rounds at the deadline (at least one round always runs, and the result says how many episodes
it got). The progress bar's total is the number of iterations that fit, so its ETA is an ETA
against the budget.

>>> b = Budget(100.0, t0=0.0)
>>> b.eval_reserve_s = 20.0
>>> b.training_over(now=79.0), b.training_over(now=81.0)
(False, True)
>>> b.iterations_that_fit(done=10, mean_iteration_s=2.0, now=20.0, planned=1000)
40
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

SAFETY = 1.25
"""Eval estimates are multiplied by this (episodes that end late, video frames)."""


@dataclass
class Budget:
    seconds: float | None
    t0: float
    eval_reserve_s: float = 0.0

    @classmethod
    def start(cls, seconds: float | None) -> Budget:
        return cls(seconds, time.perf_counter())

    def elapsed(self, now: float | None = None) -> float:
        return (time.perf_counter() if now is None else now) - self.t0

    def left(self, now: float | None = None) -> float | None:
        return None if self.seconds is None else self.seconds - self.elapsed(now)

    def training_over(self, now: float | None = None) -> bool:
        left = self.left(now)
        return left is not None and left <= self.eval_reserve_s

    @property
    def deadline(self) -> float | None:
        """``time.perf_counter()`` value at which the whole run should be over."""
        return None if self.seconds is None else self.t0 + self.seconds

    def reserve_eval(
        self,
        step_s: float,
        train_envs: int,
        eval_envs: int,
        episodes: int,
        splits: int,
        policy_steps_per_episode: int,
    ) -> float:
        """Estimate the final eval from one measured batched policy step of ``train_envs`` envs."""
        n = max(1, min(eval_envs, episodes))
        rounds = math.ceil(episodes / n) * splits
        per_step = step_s * n / max(1, train_envs)
        self.eval_reserve_s = SAFETY * rounds * policy_steps_per_episode * per_step
        return self.eval_reserve_s

    def iterations_that_fit(
        self, done: int, mean_iteration_s: float, now: float | None = None, planned: int = 0
    ) -> int:
        """Iterations the run will reach (for the progress bar): ``planned`` or fewer."""
        left = self.left(now)
        if left is None or mean_iteration_s <= 0:
            return planned
        more = max(0, int((left - self.eval_reserve_s) / mean_iteration_s))
        return min(planned, done + more)
