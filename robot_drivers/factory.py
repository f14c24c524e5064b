"""Build arms from config data: backend name -> factory table (no if/elif on strings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from robot_drivers.arm import ArmBackend, DriverError, FrankaArm
from robot_drivers.safety import SafetyConfig
from robot_drivers.types import PANDA_HOME


@dataclass
class ArmConfig:
    """One arm: which backend drives it and its safety limits."""

    name: str = field(default="arm", metadata={"help": "arm name (logs, dual-arm side)"})
    backend: str = field(default="sim", metadata={"help": "sim | kinematic | libfranka"})
    ip: str = field(default="", metadata={"help": "robot IP (libfranka)"})
    joint_prefix: str = field(default="panda_", metadata={"help": "joint names are <prefix>joint1..7"})
    home: tuple[float, ...] = field(default=PANDA_HOME, metadata={"help": "home joint positions (rad)"})
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    command_period_s: float = field(default=0.1, metadata={"help": "expected time between commands"})


def _sim(cfg: ArmConfig) -> ArmBackend:
    from robot_drivers.sim_arm import MujocoArmBackend

    return MujocoArmBackend(home=cfg.home)


def _kinematic(cfg: ArmConfig) -> ArmBackend:
    from robot_drivers.sim_arm import KinematicArmBackend

    return KinematicArmBackend(home=cfg.home)


def _libfranka(cfg: ArmConfig) -> ArmBackend:
    from robot_drivers.libfranka_arm import LibfrankaArmBackend

    return LibfrankaArmBackend(cfg.ip)


ARM_BACKENDS: dict[str, Callable[[ArmConfig], ArmBackend]] = {
    "sim": _sim, "kinematic": _kinematic, "libfranka": _libfranka}


def make_arm(cfg: ArmConfig) -> FrankaArm:
    """A (not yet connected) :class:`FrankaArm` for ``cfg``."""
    try:
        factory = ARM_BACKENDS[cfg.backend]
    except KeyError:
        raise DriverError(f"arm {cfg.name!r}: unknown backend {cfg.backend!r}; known: {sorted(ARM_BACKENDS)}") from None
    return FrankaArm(factory(cfg), cfg.safety, name=cfg.name, joint_prefix=cfg.joint_prefix,
                     command_period_s=cfg.command_period_s)
