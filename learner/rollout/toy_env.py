"""``toy/point_reach``: a 2-D point mass that must reach a goal, in numpy, thousands of steps/s.

Why it exists: runner smoke tests and placement benchmarks need an env that implements the
full vector-env contract (auto-reset, chunks, ``final_observation``, success, images) but
costs microseconds, so the test measures the learner, not the simulator. PPO solves it in a
few thousand env steps.

State ``[pos(2), vel(2), goal - pos(2)]``; action = acceleration in [-1, 1]^2; reward
``-|goal - pos|`` per step (+1 and termination on reaching within ``success_radius``).
``obs_mode="image"`` adds a ``top`` camera (agent green, goal red). ``ood="far"`` samples
goals in a wider ring than training ("id").
"""

from __future__ import annotations

import numpy as np

from rlinf_contracts.env import EnvSpec, Observation, StepResult, VectorEnv
from rlinf_contracts.env_registry import register_env
from rlinf_contracts.stepping import Rows, RowStep, SteppedVectorEnv

_GOAL_RANGES = {"id": (0.3, 0.8), "far": (0.8, 1.0)}


class PointReachEnv(SteppedVectorEnv):
    """Vectorised point-mass reach; see the module docstring. The contract's bookkeeping comes
    from :class:`SteppedVectorEnv`; the hooks below are the whole simulator."""

    def __init__(
        self,
        num_envs: int = 8,
        obs_mode: str = "state",
        max_episode_steps: int = 30,
        ood: str = "id",
        image_size: int = 32,
        success_radius: float = 0.1,
        step_cost_us: float = 0.0,
        **_: object,
    ) -> None:
        if ood not in _GOAL_RANGES:
            raise ValueError(
                f"toy/point_reach: unknown ood split {ood!r}; known: {sorted(_GOAL_RANGES)}"
            )
        if obs_mode not in ("state", "image"):
            raise ValueError(
                f"toy/point_reach: obs_mode must be 'state' or 'image', got {obs_mode!r}"
            )
        cams = {"top": (image_size, image_size)} if obs_mode == "image" else {}
        super().__init__(
            EnvSpec(
                num_envs=num_envs,
                state_dim=6,
                action_dim=2,
                cameras=cams,
                max_episode_steps=max_episode_steps,
                control_hz=10.0,
                instruction="move the point to the red goal",
            )
        )
        self.goal_range = _GOAL_RANGES[ood]
        self.radius = success_radius
        self.step_cost_us = step_cost_us  # optional busy-work, to emulate a heavier simulator
        self._rngs = [np.random.default_rng(i) for i in range(num_envs)]
        self.pos = np.zeros((num_envs, 2))
        self.vel = np.zeros((num_envs, 2))
        self.goal = np.zeros((num_envs, 2))

    def _reset_rows(self, rows: np.ndarray) -> None:
        for i in rows:
            rng = self._rngs[i]
            self.pos[i] = rng.uniform(-0.2, 0.2, 2)
            ang, r = rng.uniform(0, 2 * np.pi), rng.uniform(*self.goal_range)
            self.goal[i] = [r * np.cos(ang), r * np.sin(ang)]
        self.vel[rows] = 0.0

    def _step_rows(self, rows: Rows, actions: np.ndarray) -> RowStep:
        self.vel[rows] = 0.8 * self.vel[rows] + 0.05 * actions
        self.pos[rows] = np.clip(self.pos[rows] + self.vel[rows], -1.2, 1.2)
        dist = np.linalg.norm(self.goal[rows] - self.pos[rows], axis=1)
        reached = dist < self.radius
        return RowStep(reward=-dist + reached, success=reached)

    def _observe(self) -> Observation:
        state = np.concatenate([self.pos, self.vel, self.goal - self.pos], axis=1).astype(
            np.float32
        )
        obs = {"state": state, "images": {}, "instruction": [self.spec.instruction] * self.num_envs}
        if self.spec.cameras:
            obs["images"] = {"top": self._draw(self.spec.cameras["top"][0])}
        return obs

    def _draw(self, size: int) -> np.ndarray:
        img = np.full((self.num_envs, size, size, 3), 30, dtype=np.uint8)
        to_px = lambda p: np.clip(((p + 1.2) / 2.4 * size).astype(int), 1, size - 2)  # noqa: E731
        b = np.arange(self.num_envs)
        for pts, color in ((self.goal, (220, 40, 40)), (self.pos, (40, 220, 40))):
            px = to_px(pts)
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    img[b, px[:, 1] + dy, px[:, 0] + dx] = color
        return img

    def step(self, actions: np.ndarray) -> StepResult:
        out = super().step(actions)
        if self.step_cost_us > 0:  # once per call, as a heavier simulator's per-call cost
            _busy_wait(self.step_cost_us * 1e-6 * self.num_envs)
        return out

    def render_frames(self) -> np.ndarray:
        return self._draw(64)


def _busy_wait(seconds: float) -> None:
    import time

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@register_env("toy")
def make_toy(task: str, num_envs: int = 1, **kwargs: object) -> VectorEnv:
    if task != "point_reach":
        raise ValueError(f"unknown toy task {task!r}; known: point_reach")
    return PointReachEnv(num_envs=num_envs, **kwargs)
