"""MuJoCo Franka Panda task family, the embedded default simulator.

``make_env("mujoco_franka/reach", num_envs=16, obs_mode="state", control="ee_delta")`` builds a
:class:`FrankaVectorEnv`; every keyword is a field of :class:`FrankaEnvConfig`. Tasks: reach,
push, lift (see :data:`TASKS`). :class:`FrankaScene` is the same model for single-robot use
(the simulated robot driver), and :func:`oracle_action` a scripted expert for every task.
"""

from __future__ import annotations

from typing import Any

from rlinf_contracts.env_registry import register_env
from sim_bridges.mujoco_franka.config import FrankaEnvConfig
from sim_bridges.mujoco_franka.oracle import oracle_action
from sim_bridges.mujoco_franka.scene import FrankaScene
from sim_bridges.mujoco_franka.tasks import TASKS, get_task
from sim_bridges.mujoco_franka.vector_env import FrankaVectorEnv


@register_env("mujoco_franka")
def make_franka_env(task: str = "reach", num_envs: int = 1, **kwargs: Any) -> FrankaVectorEnv:
    """Factory behind ``make_env("mujoco_franka/<task>", ...)``; unknown tasks list the known
    ones."""
    get_task(task or "reach")  # fail early with the task list
    return FrankaVectorEnv(FrankaEnvConfig.from_kwargs(task or "reach", num_envs, **kwargs))


__all__ = [
    "FrankaEnvConfig",
    "FrankaScene",
    "FrankaVectorEnv",
    "TASKS",
    "make_franka_env",
    "oracle_action",
]
