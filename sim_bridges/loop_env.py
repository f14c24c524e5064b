"""``LoopVectorEnv``: the vector-env contract over B single-env adapters stepped in a loop.

Bridges to simulators whose Python API is one env at a time (robosuite, LIBERO, ManiSkill on a
CPU) only write a small :class:`SingleEnv` adapter — reset with a seed, step one action in
[-1, 1], report success — and get chunking, auto-reset with the final observation, episode
statistics, truncation and action checking from here, identical for every bridge.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from rlinf_contracts.env import EnvSpec, Observation, StepResult, VectorEnv, check_actions


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


class LoopVectorEnv(VectorEnv):
    """B :class:`SingleEnv` adapters behind the batched contract."""

    def __init__(self, adapters: list[SingleEnv], spec: EnvSpec, terminate_on_success: bool = True,
                 reward_fn: Callable[[float, bool], float] | None = None) -> None:
        if len(adapters) != spec.num_envs:
            raise ValueError(f"got {len(adapters)} adapters for spec.num_envs={spec.num_envs}")
        self.adapters = adapters
        self.spec = spec
        self.terminate_on_success = terminate_on_success
        self.reward_fn = reward_fn
        b = spec.num_envs
        self._rngs = [np.random.default_rng(None) for _ in range(b)]
        self._last: list[SingleObs | None] = [None] * b
        self._steps = np.zeros(b, dtype=np.int64)
        self._returns = np.zeros(b)
        self._ever = np.zeros(b, dtype=bool)

    def _reset_one(self, i: int) -> None:
        self._last[i] = self.adapters[i].reset(int(self._rngs[i].integers(2**31 - 1)))
        self._steps[i], self._returns[i], self._ever[i] = 0, 0.0, False

    def reset(self, seed: int | None = None) -> Observation:
        if seed is not None:
            self._rngs = [np.random.default_rng(seed + i) for i in range(self.num_envs)]
        for i in range(self.num_envs):
            self._reset_one(i)
        return self._batch()

    def step(self, actions: np.ndarray) -> StepResult:
        if any(o is None for o in self._last):
            raise RuntimeError("call reset() before step()")
        chunked = np.ndim(actions) == 3
        acts = check_actions(actions, self.spec)
        b, chunk, _ = acts.shape
        rewards = np.zeros((b, chunk), dtype=np.float32)
        valid = np.zeros((b, chunk), dtype=bool)
        term, trunc, success = (np.zeros(b, dtype=bool) for _ in range(3))
        for k in range(chunk):
            for i in np.flatnonzero(~(term | trunc)):
                res = self.adapters[i].step(acts[i, k])
                r = self.reward_fn(res.reward, res.success) if self.reward_fn else res.reward
                valid[i, k], rewards[i, k], success[i] = True, r, res.success
                self._last[i] = res.obs
                self._returns[i] += r
                self._steps[i] += 1
                self._ever[i] |= res.success
                term[i] = (res.success and self.terminate_on_success) or res.failed
                trunc[i] = not term[i] and self._steps[i] >= self.spec.max_episode_steps
        done = term | trunc
        info: dict[str, Any] = {
            "success": success,
            "episode_return": np.where(done, self._returns, 0.0).astype(np.float32),
            "episode_length": np.where(done, self._steps, 0),
            "valid_steps": valid,
        }
        if done.any():
            info["final_observation"] = self._batch()
            info["success"] = np.where(done, self._ever, success)
            for i in np.flatnonzero(done):
                self._reset_one(i)
        return self._batch(), rewards if chunked else rewards[:, 0], term, trunc, info

    def _batch(self) -> Observation:
        obs = [o for o in self._last if o is not None]
        return {
            "state": np.stack([o.state for o in obs]).astype(np.float32, copy=False),
            "images": {c: np.stack([o.images[c] for o in obs]) for c in self.spec.cameras},
            "instruction": [o.instruction for o in obs],
        }

    def close(self) -> None:
        for a in self.adapters:
            a.close()
