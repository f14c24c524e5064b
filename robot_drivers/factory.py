"""Build arms from config data: backend name -> factory table (no if/elif on strings)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.impedance import ImpedanceGains
from robot_drivers.arm import ArmBackend, DriverError, FrankaArm
from robot_drivers.impedance_law import ImpedanceTracking
from robot_drivers.kinematics import EE_FRAMES
from robot_drivers.safety import SafetyConfig
from robot_drivers.types import PANDA_HOME


@dataclass
class ArmConfig:
    """One arm: which backend drives it and its safety limits."""

    name: str = field(default="arm", metadata={"help": "arm name (logs, dual-arm side)"})
    backend: str = field(default="sim", metadata={"help": "sim | kinematic | libfranka | bridge"})
    ip: str = field(default="", metadata={"help": "robot IP (libfranka)"})
    realtime: str = field(
        default="enforce",
        metadata={"help": "libfranka: enforce (PREEMPT_RT kernel) | ignore (franky-sim)"},
    )
    joint_prefix: str = field(
        default="panda_", metadata={"help": "joint names are <prefix>joint1..7"}
    )
    home: tuple[float, ...] = field(
        default=PANDA_HOME, metadata={"help": "home joint positions (rad)"}
    )
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    control: str = field(
        default="position",
        metadata={
            "help": "position (joint targets; target poses by IK) | ee_impedance (target poses "
            "tracked by the Cartesian impedance law in the backend's torque loop: libfranka, "
            "sim; a bridge's compliant controller is set by robot.bridge instead)"
        },
    )
    impedance: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "control ee_impedance: the law's gains (ImpedanceGains keys; the robot "
            "spec's action.impedance, unset keys = its defaults)"
        },
    )
    command_period_s: float = field(
        default=0.1, metadata={"help": "expected time between commands"}
    )
    gripper_deadband: float = field(
        default=1e-3,
        metadata={
            "help": "a streamed gripper width (a trajectory's finger joint: a policy's per-step "
            "output) moves the gripper only when it differs from the last width sent by more "
            "than this (m); libfranka's moves block the robot node (docs/real_franka.md)"
        },
    )
    gripper_process: bool = field(
        default=True,
        metadata={
            "help": "libfranka: run the Franka Hand's calls in a process of their own "
            "(robot_drivers.gripper_worker): pylibfranka holds Python's GIL for a whole gripper "
            "motion, which in the control process stalls the 1 kHz loop into a reflex; "
            "gripper commands then return at once (docs/real_franka.md)"
        },
    )
    joints: list[str] = field(
        default_factory=list,
        metadata={
            "help": "bridge: the stack's joint names in order (empty: <prefix>joint1..7); ours "
            "stay <prefix>jointN"
        },
    )
    kinematics: str = field(
        default="panda",
        metadata={
            "help": "bridge: panda (FK for the EE pose / workspace box) | none (other arms: the "
            "stack's pose only)"
        },
    )
    state_timeout_s: float = field(
        default=0.5, metadata={"help": "bridge: older joint states count as an error"}
    )
    stack_ee_frame: str = field(
        default="hand_tcp",
        metadata={
            "help": "bridge, kinematics panda: the end-effector frame of the stack's pose topic "
            "and of its Cartesian controller's targets (robot_drivers.kinematics.EE_FRAMES: "
            "hand_tcp | flange | grip_site); converted to / from the grip site the arm reports. "
            "hand_tcp is what franka_ros2 ships (O_T_EE with Desk's Franka Hand; CRISP's "
            "fr3_hand_tcp); flange where Desk sets no end effector or CRISP's "
            "end_effector_frame is the last link"
        },
    )
    scene: str = field(
        default="",
        metadata={
            "help": "sim: the twin's world (SCENES); '' = the bare Panda scene, "
            "franka_language/<mix>[:<split>] = that env's scene (objects, colours, "
            "instruction per episode; sim_bridges.mujoco_franka.twin), "
            "mujoco_franka/<task> = that task env (push: puck + goal; insert: peg + hole, for "
            "control ee_impedance; "
            "sim_bridges.mujoco_franka.task_twin)"
        },
    )
    scene_seed: int = field(
        default=0,
        metadata={
            "help": "sim scene: episode k is drawn as for held-out seed scene_seed + k - 1 "
            "(eval.seed_offset replays rlinf eval's episodes)"
        },
    )

    def gains(self) -> ImpedanceGains | None:
        """The impedance gains of an ``ee_impedance`` arm (None for position control)."""
        if self.control not in ARM_CONTROLS:
            raise ConfigError(
                f"key 'robot.arms[{self.name}].control' is {self.control!r}; use one of "
                f"{list(ARM_CONTROLS)}"
            )
        if self.control == "position":
            return None
        return ImpedanceGains.from_dict(self.impedance, prefix=f"robot.arms[{self.name}].impedance")


ARM_CONTROLS = ("position", "ee_impedance")


def _language_scene(cfg: ArmConfig, rest: str) -> Callable[[], object]:
    mix, _, split = rest.partition(":")
    if not mix:
        raise DriverError(
            f"arm {cfg.name!r}: scene {cfg.scene!r} unknown (no mix); use "
            "franka_language/<mix>[:<split>]"
        )

    def scene() -> object:  # built on connect, in the process that steps it
        from sim_bridges.mujoco_franka.twin import LanguageSceneTwin

        return LanguageSceneTwin(mix, split or "id", seed=cfg.scene_seed)

    return scene


def _task_scene(cfg: ArmConfig, rest: str) -> Callable[[], object]:
    task = rest.strip()
    if not task:
        raise DriverError(
            f"arm {cfg.name!r}: scene {cfg.scene!r} unknown (no task); use "
            "mujoco_franka/<task> (e.g. push)"
        )

    def scene() -> object:
        from sim_bridges.mujoco_franka.task_twin import TaskSceneTwin

        return TaskSceneTwin(task, seed=cfg.scene_seed)

    return scene


# scene family (the part before '/') -> (arm config, the rest) -> a builder of the twin's world.
# The builder runs on connect, in the process that steps the physics (MuJoCo state is not shared).
SCENES: dict[str, Callable[[ArmConfig, str], Callable[[], object]]] = {
    "franka_language": _language_scene,
    "mujoco_franka": _task_scene,
}


def _sim(cfg: ArmConfig) -> ArmBackend:
    from robot_drivers.sim_arm import MujocoArmBackend

    scene = None
    if cfg.scene:
        family, _, rest = cfg.scene.partition("/")
        if family not in SCENES:
            raise DriverError(
                f"arm {cfg.name!r}: scene {cfg.scene!r} unknown; use '' or one of "
                f"{', '.join(f'{k}/...' for k in sorted(SCENES))}"
            )
        scene = SCENES[family](cfg, rest)
    return MujocoArmBackend(home=cfg.home, scene=scene)


def _kinematic(cfg: ArmConfig) -> ArmBackend:
    from robot_drivers.sim_arm import KinematicArmBackend

    return KinematicArmBackend(home=cfg.home)


def _libfranka(cfg: ArmConfig) -> ArmBackend:
    from robot_drivers.libfranka_arm import LibfrankaArmBackend

    return LibfrankaArmBackend(cfg.ip, realtime=cfg.realtime, gripper_process=cfg.gripper_process)


def _bridge(cfg: ArmConfig) -> ArmBackend:
    from robot_drivers.bridge_arm import BridgeArmBackend

    joints = list(cfg.joints) or [f"{cfg.joint_prefix}joint{i}" for i in range(1, 8)]
    if cfg.stack_ee_frame not in EE_FRAMES:
        raise ConfigError(
            f"key 'robot.arms[{cfg.name}].stack_ee_frame' is {cfg.stack_ee_frame!r}; use one of "
            f"{sorted(EE_FRAMES)} (the frame the stack's pose and Cartesian controller use)"
        )
    return BridgeArmBackend(
        joints,
        kinematics=cfg.kinematics,
        state_timeout_s=cfg.state_timeout_s,
        ee_frame=cfg.stack_ee_frame,
    )


ARM_BACKENDS: dict[str, Callable[[ArmConfig], ArmBackend]] = {
    "sim": _sim,
    "kinematic": _kinematic,
    "libfranka": _libfranka,
    "bridge": _bridge,
}


def make_arm(cfg: ArmConfig) -> FrankaArm:
    """A (not yet connected) :class:`FrankaArm` for ``cfg``."""
    try:
        factory = ARM_BACKENDS[cfg.backend]
    except KeyError:
        raise DriverError(
            f"arm {cfg.name!r}: unknown backend {cfg.backend!r}; known: {sorted(ARM_BACKENDS)}"
        ) from None
    gains = cfg.gains()
    backend = factory(cfg)
    if gains is not None and not isinstance(backend, ImpedanceTracking):
        raise ConfigError(
            f"key 'robot.arms[{cfg.name}].control': ee_impedance needs a backend with a torque "
            f"loop (libfranka, sim); {cfg.backend!r} has none"
            + (
                " (bridge: the compliant controller of robot.bridge.target tracks the pose)"
                if cfg.backend == "bridge"
                else ""
            )
        )
    return FrankaArm(
        backend,
        cfg.safety,
        name=cfg.name,
        joint_prefix=cfg.joint_prefix,
        command_period_s=cfg.command_period_s,
        impedance=gains,
        home=np.asarray(cfg.home, dtype=np.float64),
        gripper_deadband=cfg.gripper_deadband,
    )
