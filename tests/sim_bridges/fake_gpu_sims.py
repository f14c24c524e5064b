"""Tiny stand-ins for GPU-batched simulators (ManiSkill ``physx_cuda``, IsaacLab) with their gym
APIs and torch tensors, so the bridges' batched paths run on a CPU: B point masses pushed toward
goals, every row stepped on every call, partial (ManiSkill) or internal (IsaacLab) resets."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch


class _PointMasses:
    def __init__(self, num_envs: int) -> None:
        self.n = num_envs
        self.rngs = [np.random.default_rng(i) for i in range(num_envs)]
        self.pos, self.goal = np.zeros((num_envs, 2)), np.zeros((num_envs, 2))
        self.actions: list[np.ndarray] = []  # every action batch received, for the tests

    def place(self, rows: np.ndarray) -> None:
        for i in rows:
            self.pos[i], self.goal[i] = (
                self.rngs[i].uniform(-0.5, 0.5, 2),
                self.rngs[i].uniform(-0.5, 0.5, 2),
            )

    def move(self, action: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        a = action.numpy().astype(np.float64)
        self.actions.append(a.copy())
        self.pos = self.pos + 0.1 * a
        dist = np.linalg.norm(self.pos - self.goal, axis=1)
        return -dist, dist < 0.05

    def state(self) -> torch.Tensor:
        return torch.as_tensor(np.concatenate([self.pos, self.goal], axis=1), dtype=torch.float32)


class FakeManiSkill(_PointMasses):
    """``gym.make(task, num_envs=B, sim_backend="physx_cuda", obs_mode="state")`` look-alike;
    ``fail`` when a point leaves the unit box."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        self.action_space = SimpleNamespace(
            low=-np.ones((num_envs, 2)), high=np.ones((num_envs, 2))
        )
        self.unwrapped = SimpleNamespace(control_freq=20, device="cpu")

    def reset(self, seed: int | list[int] | None = None, options: dict | None = None):
        if seed is not None:
            seeds = [seed + i for i in range(self.n)] if isinstance(seed, int) else seed
            self.rngs = [np.random.default_rng(s) for s in seeds]
        rows = np.arange(self.n) if not options else options["env_idx"].numpy()
        self.place(rows)
        return self.state(), {}

    def step(self, action: torch.Tensor):
        reward, ok = self.move(action)
        fail = np.abs(self.pos).max(axis=1) > 1.0
        info = {"success": torch.as_tensor(ok), "fail": torch.as_tensor(fail)}
        return (
            self.state(),
            torch.as_tensor(reward),
            torch.zeros(self.n, dtype=torch.bool),
            torch.zeros(self.n, dtype=torch.bool),
            info,
        )

    def close(self) -> None:
        pass


class FakeIsaacLab(_PointMasses):
    """IsaacLab manager-based env look-alike: terminates on its ``success`` term, times out after
    ``time_limit`` steps, and resets finished rows inside ``step``."""

    def __init__(self, num_envs: int, time_limit: int = 1000) -> None:
        super().__init__(num_envs)
        self.time_limit, self.t = time_limit, np.zeros(num_envs, dtype=int)
        self.ok = np.zeros(num_envs, dtype=bool)
        manager = SimpleNamespace(
            active_terms=["success", "time_out"],
            get_term=lambda name: torch.as_tensor(self.ok if name == "success" else self.t < 0),
        )
        self.unwrapped = SimpleNamespace(
            single_action_space=SimpleNamespace(shape=(2,)),
            step_dt=0.05,
            termination_manager=manager,
            seed=self._seed,
        )

    def _seed(self, seed: int) -> None:
        self.rngs = [np.random.default_rng(seed + i) for i in range(self.n)]

    def reset(self):
        self.place(np.arange(self.n))
        self.t[:] = 0
        return {"policy": self.state()}, {}

    def step(self, action: torch.Tensor):
        reward, self.ok = self.move(action)
        self.t += 1
        timeout = self.t >= self.time_limit
        done = self.ok | timeout
        self.place(np.flatnonzero(done))
        self.t[done] = 0
        return (
            {"policy": self.state()},
            torch.as_tensor(reward),
            torch.as_tensor(self.ok),
            torch.as_tensor(timeout),
            {},
        )

    def close(self) -> None:
        pass
