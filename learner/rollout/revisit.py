"""Re-run the start states whose whole GRPO group failed (``algorithm.revisit_share``).

Why: a group's advantage is each member's return minus the group mean, so a group in which every
member fails carries no gradient at all. On the states a policy fails most, a few noisy samples
often all fail (flow VLA push after GRPO: sampled success ~0.12 there), and such a state teaches
nothing however often fresh states like it come up. Resetting that *same* state again in a later
iteration gives it another group of samples -- another chance of one success to contrast with the
failures -- at the cost of fresh states in that share of the batch (prioritised level replay in its
simplest form). The simulators are deterministic given the reset seed, so a group's seed is its
start state.

:class:`FailedStates` only keeps seeds; :class:`~learner.rollout.envs.StageEnvs` asks it for each
stage's group seeds at reset and reports which groups had no success when the iteration ends.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np


@dataclass
class FailedStates:
    """Seeds of all-fail groups waiting for another try (oldest first, bounded)."""

    share: float  # at most this fraction of a stage's groups are re-runs
    times: int  # a state is re-run at most this often
    capacity: int  # queue bound: the oldest seeds drop out first (the policy has moved on)
    queue: deque[tuple[int, int]] = field(default_factory=deque)  # (seed, re-runs so far)

    def draw(self, fresh: list[int]) -> tuple[list[int], list[int]]:
        """Group seeds for one stage and how often each was re-run before: up to ``share`` of
        ``fresh`` (from the front) replaced by queued seeds."""
        seeds, runs = list(fresh), [0] * len(fresh)
        for j in range(min(len(self.queue), int(self.share * len(fresh)))):
            seeds[j], runs[j] = self.queue.popleft()
        return seeds, runs

    def record(self, seeds: list[int], runs: list[int], group_success: np.ndarray) -> int:
        """Queue the seeds of the groups without a success that may run again; returns how many."""
        added = 0
        for seed, n, ok in zip(seeds, runs, np.asarray(group_success, bool).tolist()):
            if not ok and n < self.times:
                self.queue.append((seed, n + 1))
                added += 1
        while len(self.queue) > self.capacity:
            self.queue.popleft()
        return added
