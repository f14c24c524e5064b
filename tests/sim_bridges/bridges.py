"""The bridges that run on this machine, as conformance factories ``make(num_envs, max_steps)``."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np

from rlinf_contracts.env import EnvSpec, VectorEnv
from rlinf_contracts.env_registry import make_env
from sim_bridges.loop_env import LoopVectorEnv, SingleEnv, SingleObs, SingleStep


class PointMass(SingleEnv):
    """A 2-D point pushed toward a goal: a cheap ``SingleEnv`` to test ``LoopVectorEnv`` itself."""

    def reset(self, seed: int) -> SingleObs:
        rng = np.random.default_rng(seed)
        self.pos, self.goal = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
        return self._obs()

    def _obs(self) -> SingleObs:
        return SingleObs(
            np.concatenate([self.pos, self.goal]).astype(np.float32), {}, "reach the goal"
        )

    def step(self, action: np.ndarray) -> SingleStep:
        self.pos = np.clip(self.pos + 0.1 * action, -1, 1)
        dist = float(np.linalg.norm(self.pos - self.goal))
        return SingleStep(self._obs(), -dist, dist < 0.05)


def _point_mass(n: int, t: int) -> VectorEnv:
    spec = EnvSpec(
        num_envs=n, state_dim=4, action_dim=2, max_episode_steps=t, instruction="reach the goal"
    )
    return LoopVectorEnv([PointMass() for _ in range(n)], spec)


def _franka(task: str, **kw) -> Callable[[int, int], VectorEnv]:
    def make(n: int, t: int) -> VectorEnv:
        return make_env(f"mujoco_franka/{task}", num_envs=n, max_episode_steps=t, **kw)

    return make


BRIDGES: dict[str, Callable[[int, int], VectorEnv]] = {
    "loop_point_mass": _point_mass,
    "franka_reach_state_ee": _franka("reach"),
    "franka_push_state_joint": _franka("push", control="joint_delta"),
    "franka_lift_rgb_ee": _franka(
        "lift", obs_mode="state+rgb", image_size=32, cameras=("third", "wrist")
    ),
    "franka_reach_rgb_vision_ood": _franka(
        "reach",
        obs_mode="rgb",
        image_size=24,
        cameras=("third",),
        ood="vision",
        control="ee_delta_pos",
    ),
}

SLOW: set[str] = set()
if importlib.util.find_spec("robosuite") is not None:

    def _robosuite(n: int, t: int) -> VectorEnv:
        return make_env("robosuite/Lift", num_envs=n, max_episode_steps=t)

    BRIDGES["robosuite_lift_state"] = _robosuite

# bridges whose whole conformance run takes more than ~20 s on 2 cores (robosuite: ~0.6 s per env
# build): the default tier runs their QUICK_CHECKS, the slow tier (make test-slow) the rest
SLOW = {"robosuite_lift_state"}
# one or two env builds each, and between them every kind of check: spec, stepping, truncation
# inside a chunk, refused actions; determinism / auto-reset / chunk equivalence build many envs
QUICK_CHECKS = frozenset(
    {"spec_and_reset", "single_step", "truncation_inside_chunk", "bad_actions"}
)
