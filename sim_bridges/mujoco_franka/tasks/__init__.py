"""Franka tasks; importing this package registers reach, push, lift, insert and
language."""

from sim_bridges.mujoco_franka.tasks import (  # noqa: F401  (registration)
    insert,
    language,
    lift,
    push,
    reach,
)
from sim_bridges.mujoco_franka.tasks.base import TASKS, FrankaTask, get_task, register_task

__all__ = ["TASKS", "FrankaTask", "get_task", "register_task"]
