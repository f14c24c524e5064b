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

from rlinf_contracts.env import EnvSpec, VectorEnv, check_actions
from rlinf_contracts.env_registry import register_env

_GOAL_RANGES = {"id": (0.3, 0.8), "far": (0.8, 1.0)}


class PointReachEnv(VectorEnv):
    """Vectorised point-mass reach; see the module docstring."""

    def __init__(self, num_envs: int = 8, obs_mode: str = "state", max_episode_steps: int = 30,
                 ood: str = "id", image_size: int = 32, success_radius: float = 0.1,
                 step_cost_us: float = 0.0, **_: object) -> None:
        if ood not in _GOAL_RANGES:
            raise ValueError(f"toy/point_reach: unknown ood split {ood!r}; known: {sorted(_GOAL_RANGES)}")
        if obs_mode not in ("state", "image"):
            raise ValueError(f"toy/point_reach: obs_mode must be 'state' or 'image', got {obs_mode!r}")
        cams = {"top": (image_size, image_size)} if obs_mode == "image" else {}
        self.spec = EnvSpec(num_envs=num_envs, state_dim=6, action_dim=2, cameras=cams,
                            max_episode_steps=max_episode_steps, control_hz=10.0,
                            instruction="move the point to the red goal")
        self.goal_range = _GOAL_RANGES[ood]
        self.radius = success_radius
        self.step_cost_us = step_cost_us  # optional busy-work, to emulate a heavier simulator
        self.rngs = [np.random.default_rng(i) for i in range(num_envs)]
        self.pos = np.zeros((num_envs, 2))
        self.vel = np.zeros((num_envs, 2))
        self.goal = np.zeros((num_envs, 2))
        self.t = np.zeros(num_envs, dtype=np.int64)
        self.ret = np.zeros(num_envs)

    def _reset_rows(self, rows: np.ndarray) -> None:
        for i in rows:
            rng = self.rngs[i]
            self.pos[i] = rng.uniform(-0.2, 0.2, 2)
            ang, r = rng.uniform(0, 2 * np.pi), rng.uniform(*self.goal_range)
            self.goal[i] = [r * np.cos(ang), r * np.sin(ang)]
        self.vel[rows] = 0.0
        self.t[rows] = 0
        self.ret[rows] = 0.0

    def _obs(self) -> dict:
        state = np.concatenate([self.pos, self.vel, self.goal - self.pos], axis=1).astype(np.float32)
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

    def reset(self, seed: int | None = None) -> dict:
        if seed is not None:
            self.rngs = [np.random.default_rng(seed + i) for i in range(self.num_envs)]
        self._reset_rows(np.arange(self.num_envs))
        return self._obs()

    def step(self, actions: np.ndarray):
        acts = check_actions(actions, self.spec)
        b, chunk, _ = acts.shape
        rewards = np.zeros((b, chunk), dtype=np.float32)
        valid = np.zeros((b, chunk), dtype=bool)
        done = np.zeros(b, dtype=bool)
        terminated = np.zeros(b, dtype=bool)
        for k in range(chunk):
            live = ~done
            valid[:, k] = live
            self.vel[live] = 0.8 * self.vel[live] + 0.05 * acts[live, k]
            self.pos[live] = np.clip(self.pos[live] + self.vel[live], -1.2, 1.2)
            self.t[live] += 1
            dist = np.linalg.norm(self.goal - self.pos, axis=1)
            reached = live & (dist < self.radius)
            rewards[live, k] = -dist[live] + reached[live] * 1.0
            terminated |= reached
            done |= reached | (live & (self.t >= self.spec.max_episode_steps))
        if self.step_cost_us > 0:
            _busy_wait(self.step_cost_us * 1e-6 * b)
        self.ret += rewards.sum(1)
        truncated = done & ~terminated
        info = {"success": terminated.copy(), "valid_steps": valid,
                "episode_return": self.ret.copy(), "episode_length": self.t.copy()}
        if done.any():
            info["final_observation"] = self._obs()
            self._reset_rows(np.flatnonzero(done))
        obs = self._obs()
        rew = rewards[:, 0] if np.ndim(actions) == 2 else rewards
        return obs, rew, terminated, truncated, info

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
