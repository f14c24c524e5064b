"""Groups that share their first steps, then branch: step-level credit for outcome estimators.

Why: an outcome estimator (GRPO and kin) gives every step of an episode the same advantage,
the episode's score against its group's mean. The members of a group start from one state
(reset from one seed), so the group mean is a Monte Carlo value of that *start*; whatever one
chunk of an episode did, the outcome difference is spread over all of them. A critic fixes
this with a learned value per state (PPO's GAE); this does it without one.

The members of a group execute their leader's sampled actions for the first ``k`` policy
steps. The simulators here are deterministic given the reset seed and the actions (a test checks
MuJoCo's; an env that draws its own noise per step breaks the premise), so at step
``k`` the members are still in one state, and from there each samples on its own: the group
mean is now a Monte Carlo value of the state at step ``k``, and outcome differences come from
steps ``k..`` only. The shared steps say nothing about those differences (every member took
the same action there) and are masked out of the loss. ``k`` is drawn per group and iteration
uniformly from ``0..max_steps``, so over a run every step position is where some groups branch:
a tree rollout, without saving and restoring simulator state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SharedPrefix:
    """Per group (``group_size`` contiguous rows, leader first): the step its members branch at."""

    group_size: int
    branch_at: np.ndarray  # [groups] int: policy steps 0..branch_at-1 are the leader's

    @classmethod
    def draw(cls, num_envs: int, group_size: int, max_steps: int, seed: int) -> SharedPrefix | None:
        """Branch steps uniform in ``0..max_steps``; ``None`` when nothing would be shared."""
        if max_steps <= 0 or group_size < 2:
            return None
        if num_envs % group_size:
            raise ValueError(f"{num_envs} env rows do not split into groups of {group_size}")
        rng = np.random.default_rng(seed)
        return cls(group_size, rng.integers(0, max_steps + 1, size=num_envs // group_size))

    def shared(self, step: int) -> np.ndarray:
        """[B] bool: rows that execute their group leader's action at policy step ``step``."""
        return np.repeat(step < self.branch_at, self.group_size)

    def apply(self, step: int, actions: np.ndarray, logp: np.ndarray) -> np.ndarray:
        """Copy each still-shared group's leader row onto its members (in place).

        Returns the credit mask ``[B]`` float32: 0 on shared steps (leader included), 1 elsewhere.
        """
        shared = self.shared(step)
        rows = np.flatnonzero(shared)
        if rows.size:
            leaders = rows - rows % self.group_size
            actions[rows] = actions[leaders]
            logp[rows] = logp[leaders]
        return (~shared).astype(np.float32)
