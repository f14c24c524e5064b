"""Plain data the drivers exchange: arm / gripper state, robot modes, end-effector poses.

Why a separate module: the ROS nodes, the safety layer and every backend (pylibfranka, sim)
speak these types, so none of them needs to import another's internals. Arrays are numpy
float64 in SI units (rad, rad/s, Nm, m); quaternions are ``[x, y, z, w]`` as in ROS.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

# Panda / FR3 limits from the Franka datasheet (rad, rad/s). Used as safety defaults.
PANDA_Q_MIN = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
PANDA_Q_MAX = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)
PANDA_DQ_MAX = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)
PANDA_DDQ_MAX = (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)  # joint accelerations (rad/s^2)
PANDA_HOME = (0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398)
PANDA_GRIPPER_MAX_WIDTH = 0.08


class RobotMode(enum.IntEnum):
    """libfranka's RobotMode values (franka_ros2 publishes the same integers)."""

    OTHER = 0
    IDLE = 1
    MOVE = 2
    GUIDING = 3
    REFLEX = 4
    USER_STOPPED = 5
    AUTOMATIC_ERROR_RECOVERY = 6


@dataclass(frozen=True)
class EEPose:
    """End-effector pose in the robot base frame: position [3] m, quaternion [x, y, z, w]."""

    position: np.ndarray
    quat_xyzw: np.ndarray

    def as_array(self) -> np.ndarray:
        """[x, y, z, qx, qy, qz, qw] float64."""
        return np.concatenate([self.position, self.quat_xyzw]).astype(np.float64)


@dataclass(frozen=True)
class GripperState:
    """Finger opening (m), its maximum, and whether an object is held."""

    width: float = 0.0
    max_width: float = PANDA_GRIPPER_MAX_WIDTH
    is_grasped: bool = False


@dataclass(frozen=True)
class ArmState:
    """One reading of an arm. ``errors`` lists the names of active libfranka errors."""

    q: np.ndarray
    dq: np.ndarray
    tau_j: np.ndarray
    ee_pose: EEPose
    gripper: GripperState = field(default_factory=GripperState)
    mode: RobotMode = RobotMode.IDLE
    errors: tuple[str, ...] = ()
    stamp: float = 0.0  # time.monotonic() of the reading

    @property
    def has_error(self) -> bool:
        return bool(self.errors) or self.mode == RobotMode.REFLEX


@dataclass(frozen=True)
class CommandOutcome:
    """What the safety layer did with a command: the target really sent and why it changed.

    ``refused`` means nothing moved (e-stop, error state, a NaN target); ``events`` names each
    clamp applied (``"position_limit"``, ``"velocity_limit"``, ``"max_step"``, ``"workspace"``...);
    ``reason`` says why a command was refused and what to do.
    """

    target: np.ndarray
    events: tuple[str, ...] = ()
    refused: bool = False
    reason: str = ""

    @property
    def clamped(self) -> bool:
        return bool(self.events) and not self.refused
