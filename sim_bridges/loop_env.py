"""``LoopVectorEnv``: the vector-env contract over B single-env adapters stepped in a loop.

Bridges to simulators whose Python API is one env at a time (robosuite, LIBERO, ManiSkill on a
CPU) only write a small :class:`SingleEnv` adapter — reset with a seed, step one action in
[-1, 1], report success — and get chunking, auto-reset with the final observation, episode
statistics, truncation and action checking from
:class:`~rlinf_contracts.stepping.SteppedVectorEnv`, identical for every bridge.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rlinf_contracts.env import EnvSpec, Observation
from rlinf_contracts.stepping import Rows, RowStep, SteppedVectorEnv


@dataclass
class SingleObs:
    """One env's canonical observation: ``state`` float32 [D], ``images`` {cam: uint8 [H,W,3]}."""

    state: np.ndarray
    images: dict[str, np.ndarray]
    instruction: str = ""


@dataclass
class SingleStep:
    obs: SingleObs
    reward: float
    success: bool
    failed: bool = False  # simulator-side termination that is not success (e.g. object fell off)


class SingleEnv(abc.ABC):
    """What a one-env-at-a-time simulator must offer to become a :class:`LoopVectorEnv`."""

    @abc.abstractmethod
    def reset(self, seed: int) -> SingleObs: ...

    @abc.abstractmethod
    def step(self, action: np.ndarray) -> SingleStep:
        """Apply one action in [-1, 1] (the adapter rescales it to the simulator's range)."""

    def close(self) -> None:  # noqa: B027 - optional
        pass


class LoopVectorEnv(SteppedVectorEnv):
    """B :class:`SingleEnv` adapters behind the batched contract (the hooks of
    :class:`~rlinf_contracts.stepping.SteppedVectorEnv`, one adapter call per row)."""

    def __init__(
        self,
        adapters: Sequence[SingleEnv],
        spec: EnvSpec,
        terminate_on_success: bool = True,
        reward_fn: Callable[[float, bool], float] | None = None,
    ) -> None:
        if len(adapters) != spec.num_envs:
            raise ValueError(f"got {len(adapters)} adapters for spec.num_envs={spec.num_envs}")
        super().__init__(spec, terminate_on_success)
        self.adapters = adapters
        self.reward_fn = reward_fn
        self._last: list[SingleObs | None] = [None] * spec.num_envs

    def _reset_rows(self, rows: np.ndarray) -> None:
        for i in rows.tolist():
            self._last[i] = self.adapters[i].reset(int(self._rngs[i].integers(2**31 - 1)))

    def _step_rows(self, rows: Rows, actions: np.ndarray) -> RowStep:
        ids = self._all_rows[rows].tolist()
        n = len(ids)
        reward, success, failed = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        for j, i in enumerate(ids):
            res = self.adapters[i].step(actions[j])
            reward[j] = self.reward_fn(res.reward, res.success) if self.reward_fn else res.reward
            success[j], failed[j] = res.success, res.failed
            self._last[i] = res.obs
        return RowStep(reward, success, failed)

    def _observe(self) -> Observation:
        obs = [o for o in self._last if o is not None]
        return {
            "state": np.stack([o.state for o in obs]).astype(np.float32, copy=False),
            "images": {c: np.stack([o.images[c] for o in obs]) for c in self.spec.cameras},
            "instruction": [o.instruction for o in obs],
        }

    def close(self) -> None:
        for a in self.adapters:
            a.close()
