"""Franka tasks; importing this package registers reach, push, lift and language."""

from sim_bridges.mujoco_franka.tasks import language, lift, push, reach  # noqa: F401  (registration)
from sim_bridges.mujoco_franka.tasks.base import TASKS, FrankaTask, get_task, register_task

__all__ = ["TASKS", "FrankaTask", "get_task", "register_task"]
