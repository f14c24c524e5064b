"""The bridges that run on this machine, as conformance factories ``make(num_envs, max_steps)``."""

from __future__ import annotations

import importlib.util
from typing import Callable

from sim_bridges.contract import VectorEnv
from sim_bridges.registry import make_env


def _franka(task: str, **kw) -> Callable[[int, int], VectorEnv]:
    def make(n: int, t: int) -> VectorEnv:
        return make_env(f"mujoco_franka/{task}", num_envs=n, max_episode_steps=t, **kw)

    return make


BRIDGES: dict[str, Callable[[int, int], VectorEnv]] = {
    "franka_reach_state_ee": _franka("reach"),
    "franka_push_state_joint": _franka("push", control="joint_delta"),
    "franka_lift_rgb_ee": _franka("lift", obs_mode="state+rgb", image_size=32,
                                  cameras=("third", "wrist")),
    "franka_reach_rgb_vision_ood": _franka("reach", obs_mode="rgb", image_size=24, cameras=("third",),
                                           ood="vision", control="ee_delta_pos"),
}

SLOW: set[str] = set()
if importlib.util.find_spec("robosuite") is not None:
    def _robosuite(n: int, t: int) -> VectorEnv:
        return make_env("robosuite/Lift", num_envs=n, max_episode_steps=t)

    BRIDGES["robosuite_lift_state"] = _robosuite

# bridges whose conformance run takes more than ~20 s here (robosuite: ~0.6 s per env build)
SLOW = {"robosuite_lift_state"}
