"""``train.time_budget_s``: one wall-clock bound on training, final checkpoint and final eval.

The clock starts when the runner starts (the process start-up before it, a few seconds, is not
counted). Training stops early enough to leave the final evaluation its estimated time (from
the measured cost of a policy step in the rollouts) plus the set-up around it (the final
checkpoint, the eval envs, loading the actor: :func:`setup_reserve_s`); the evaluation then
starts a round only when it fits before the deadline (at least one round always runs, and the
result says how many episodes it got).

Progress, one rule for every runner (:meth:`Budget.units_that_fit`): a bar counts the unit that
moves (env steps, transitions received, iterations) and its total is the planned count or the
count that fits in the training part of the budget at the measured rate, whichever is smaller,
so the ETA it shows never runs past the budget.

>>> b = Budget(100.0, t0=0.0)
>>> b.eval_reserve_s = 20.0
>>> b.training_over(now=79.0), b.training_over(now=81.0)
(False, True)
>>> b.iterations_that_fit(done=10, mean_iteration_s=2.0, now=20.0, planned=1000)
40
>>> b.units_that_fit(done=500, rate_per_s=10.0, now=20.0, planned=100_000)
1100
>>> setup_reserve_s(25.0, measured_s=0.5), setup_reserve_s(420.0, measured_s=0.5)
(1.75, 15.5)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

SAFETY = 1.25
"""Eval estimates are multiplied by this (episodes that end late, video frames)."""
SETUP_S = 15.0
"""Most kept for the set-up around the final eval (final checkpoint, eval envs, the actor)."""
SETUP_SHARE = 0.05
"""... and at most this share of the budget: a 25 s budget cannot give 15 s to set-up."""


def setup_reserve_s(seconds: float, measured_s: float = 0.0) -> float:
    """Time kept for the work around the final eval: ``measured_s`` (e.g. the last checkpoint
    save, which the final one repeats) plus ``min(SETUP_S, SETUP_SHARE * seconds)``."""
    return measured_s + min(SETUP_S, SETUP_SHARE * seconds)


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
        if mean_iteration_s <= 0:
            return planned
        return self.units_that_fit(done, 1.0 / mean_iteration_s, now, planned)

    def units_that_fit(
        self, done: int, rate_per_s: float, now: float | None = None, planned: int = 0
    ) -> int:
        """Units (env steps, transitions, iterations) the run will reach at ``rate_per_s``
        before training has to stop: ``planned`` or fewer; ``planned`` without a rate."""
        left = self.training_left(now)
        if left is None or rate_per_s <= 0:
            return planned
        return min(planned, done + int(left * rate_per_s))

    def training_left(self, now: float | None = None) -> float | None:
        """Seconds until training has to stop for the final eval (None: no budget)."""
        left = self.left(now)
        return None if left is None else max(0.0, left - self.eval_reserve_s)
