"""Env registry: a config says ``env: mujoco_franka/reach`` and the learner never imports a
simulator (or ROS) directly. Bridges register a factory per family; the part after ``/`` is the
task name handed to the factory."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any

from rlinf_contracts.env import VectorEnv
from rlinf_contracts.registry import UnknownNameError

EnvFactory = Callable[..., VectorEnv]

_FACTORIES: dict[str, EnvFactory] = {}
# family -> module that registers it on import (keeps heavy simulators lazy)
_LAZY_MODULES: dict[str, str] = {
    "mujoco_franka": "sim_bridges.mujoco_franka",
    "franka_language": "sim_bridges.mujoco_franka.language_env",
    "robosuite": "sim_bridges.robosuite_bridge",
    "maniskill": "sim_bridges.maniskill_bridge",
    "libero": "sim_bridges.libero_bridge",
    "isaaclab": "sim_bridges.isaaclab_bridge",
    "ros": "rlinf_ros.ros_robot_env",
}


class UnknownEnvError(UnknownNameError):
    """An env family or task name nobody registered; the message lists the known ones."""


def register_env(family: str) -> Callable[[EnvFactory], EnvFactory]:
    """Decorator: ``@register_env("mujoco_franka")`` on ``factory(task, num_envs, **kw)``."""

    def deco(factory: EnvFactory) -> EnvFactory:
        _FACTORIES[family] = factory
        return factory

    return deco


def known_families() -> list[str]:
    return sorted(set(_FACTORIES) | set(_LAZY_MODULES))


def make_env(name: str, num_envs: int = 1, **kwargs: Any) -> VectorEnv:
    """Build ``family/task`` with ``num_envs`` sub-envs; kwargs go to the family's factory, but
    ``state_fields`` (names of the robot spec's state fields, in the order wanted), which cuts
    the state to them (:class:`~rlinf_contracts.env_restrict.StateFieldsEnv`)."""
    family, _, task = name.partition("/")
    if family not in _FACTORIES and family in _LAZY_MODULES:
        importlib.import_module(_LAZY_MODULES[family])
    if family not in _FACTORIES:
        near = difflib.get_close_matches(family, known_families(), n=1)
        hint = f" Did you mean '{near[0]}'?" if near else ""
        raise UnknownEnvError(
            f"unknown env family '{family}' in env='{name}'. Known: "
            f"{', '.join(known_families())}.{hint}"
        )
    state_fields = kwargs.pop("state_fields", None)  # every family: a shared spec's state
    env = _FACTORIES[family](task=task, num_envs=num_envs, **kwargs)
    if state_fields is None:
        return env
    from rlinf_contracts.env_restrict import StateFieldsEnv

    try:
        return StateFieldsEnv(env, state_fields)
    except Exception:
        env.close()
        raise
