"""Bridge backend: an arm that someone else's stack already drives (ros2_control, franka_ros2).

Why a backend and not a separate node: the robot node, :class:`robot_drivers.arm.FrankaArm`
and its :class:`~robot_drivers.safety.SafetyLayer` stay exactly as for a driver we own, so the
limits, the e-stop latch and the staleness watchdog sit in the command path of a UR, xArm,
Kinova or franka_ros2 arm too. This module has no ROS in it: the robot node feeds readings in
(:meth:`BridgeArmBackend.update_joints`, :meth:`~BridgeArmBackend.update_pose`) and hands it
*sinks* that publish the safe target (a ``JointTrajectory`` to a trajectory controller, or a
``PoseStamped`` to a Cartesian impedance controller) -- see ``rlinf_ros/bridge_io.py``.

Until the first reading, or when readings stop for ``state_timeout_s``, the state carries the
error ``no_joint_states`` / ``joint_states_stale``: FrankaArm refuses motion while an arm
reports errors, and the policy client commands nothing while ``robot_state`` shows one.

End-effector pose: the stack's (franka_ros2's ``current_pose``) when it sends one, else forward
kinematics where ``kinematics: panda`` (Franka Panda / FR3), else none -- other arms get a
zero pose and ``ee_pose_source == "none"``; their specs must not use Cartesian features.

End-effector frame (Panda / FR3): the pose read reports the grip site the simulator's policies
were trained on, as every backend does, not the stack's frame. The stack's pose and the pose
targets of its Cartesian controller are in ``ee_frame``, a name of
:data:`robot_drivers.kinematics.EE_FRAMES` (``hand_tcp``: franka_ros2's ``O_T_EE`` with Desk's
Franka Hand, CRISP's ``fr3_hand_tcp``); :meth:`BridgeArmBackend.controller_pose` turns a safe
joint target into that frame's pose. Other arms' poses pass as the stack gives them.

>>> sent = []
>>> arm = BridgeArmBackend(joint_names=[f"fr3_joint{i}" for i in range(1, 8)],
...                        send_joints=sent.append, clock=lambda: 10.0)
>>> arm.read_state().errors
('no_joint_states',)
>>> arm.update_joints(np.zeros(7), np.zeros(7), np.zeros(7), stamp=10.0)
>>> arm.read_state().errors, arm.ee_pose_source
((), 'fk')
>>> arm.command_joint_positions(np.full(7, 0.1)); np.round(sent[-1], 2).tolist()
[0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
>>> site, tcp = arm.read_state().ee_pose, arm.controller_pose(np.zeros(7))  # hand TCP: 6.9 mm out
>>> round(float(np.linalg.norm(tcp.position - site.position)), 4)
0.0069
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from rlinf_contracts.rotations import matrix_to_quat_xyzw, quat_xyzw_to_matrix
from robot_drivers.arm import ArmBackend, DriverError
from robot_drivers.kinematics import (
    EE_FRAMES,
    forward_kinematics,
    grip_site_from_o_t_ee,
    o_t_ee_from_grip_site,
)
from robot_drivers.types import PANDA_GRIPPER_MAX_WIDTH, ArmState, EEPose, GripperState, RobotMode

log = logging.getLogger(__name__)

KINEMATICS: dict[str, Callable[[np.ndarray], np.ndarray] | None] = {
    "panda": forward_kinematics,
    "none": None,
}
JointSink = Callable[[np.ndarray], None]


class BridgeArmBackend(ArmBackend):
    """Readings pushed in by a ROS node, safe commands pushed out through ``send_joints``."""

    def __init__(
        self,
        joint_names: list[str],
        send_joints: JointSink | None = None,
        send_gripper: Callable[[float], bool] | None = None,
        kinematics: str = "panda",
        state_timeout_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        ee_frame: str = "hand_tcp",
    ) -> None:
        if kinematics not in KINEMATICS:
            raise ValueError(
                f"bridge kinematics {kinematics!r} unknown; known: {sorted(KINEMATICS)}"
            )
        if ee_frame not in EE_FRAMES:
            raise ValueError(f"bridge ee frame {ee_frame!r} unknown; known: {sorted(EE_FRAMES)}")
        # the frame of the stack's pose and of its Cartesian targets, from the flange
        self.ee_frame = ee_frame
        self.f_t_ee = EE_FRAMES[ee_frame]
        self.joint_names = list(joint_names)
        self.dof = len(self.joint_names)
        self.send_joints = send_joints
        self.send_gripper = send_gripper
        self.fk = KINEMATICS[kinematics]
        if self.fk is not None and self.dof != 7:
            raise ValueError(
                f"bridge kinematics 'panda' needs 7 joints, got {self.dof}; use kinematics: none"
            )
        self.state_timeout_s = state_timeout_s
        self._clock = clock
        self._q: np.ndarray | None = None
        self._dq = self._tau = np.zeros(self.dof)
        self._stamp = 0.0
        self._pose: EEPose | None = None
        self._pose_stamp = 0.0
        self.width = PANDA_GRIPPER_MAX_WIDTH
        self.sent = 0

    # ---- readings in --------------------------------------------------------------------
    def update_joints(
        self, q: np.ndarray, dq: np.ndarray, tau: np.ndarray, stamp: float | None = None
    ) -> None:
        """A reading of the stack's joint states (in ``joint_names`` order)."""
        self._q, self._dq, self._tau = (
            np.asarray(v, dtype=np.float64).copy() for v in (q, dq, tau)
        )
        self._stamp = self._clock() if stamp is None else stamp

    def update_pose(self, pose: EEPose, stamp: float | None = None) -> None:
        """The stack's own end-effector pose (franka_ros2 ``current_pose``), in ``ee_frame``;
        preferred to FK while fresh."""
        self._pose, self._pose_stamp = pose, (self._clock() if stamp is None else stamp)

    def update_gripper(self, width: float) -> None:
        self.width = float(width)

    @property
    def ready(self) -> bool:
        return self._q is not None

    @property
    def ee_pose_source(self) -> str:
        """``stack`` (a fresh pose topic), ``fk`` (Panda kinematics) or ``none``."""
        if self._pose is not None and self._clock() - self._pose_stamp <= self.state_timeout_s:
            return "stack"
        return "fk" if self.fk is not None else "none"

    def _ee_pose(self, q: np.ndarray) -> EEPose:
        source = self.ee_pose_source
        if source == "stack":
            pose: EEPose = self._pose  # type: ignore[assignment]  # "stack": a pose came
            if self.fk is None:  # another arm: no grip site to convert to
                return pose
            return _ee(grip_site_from_o_t_ee(_matrix(pose), self.f_t_ee))
        if source == "fk":
            return _ee(self._grip_site(q))
        return EEPose(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]))

    def _grip_site(self, q: np.ndarray) -> np.ndarray:
        """Base -> grip site at joints ``q``; ``fk`` (``panda``) is the hand TCP's kinematics."""
        if self.fk is None:
            raise DriverError("bridge: a Cartesian pose needs kinematics: panda; this arm has none")
        return grip_site_from_o_t_ee(self.fk(q))

    def controller_pose(self, q: np.ndarray) -> EEPose:
        """The target of a Cartesian controller for the safe joint target ``q``: the grip site
        there, in the controller's frame ``ee_frame`` -- the pose that frame has at ``q``, so the
        controller's arm ends where the joint target puts the grip site."""
        return _ee(o_t_ee_from_grip_site(self._grip_site(q), self.f_t_ee))

    def _errors(self) -> tuple[str, ...]:
        if self._q is None:
            return ("no_joint_states",)
        if self._clock() - self._stamp > self.state_timeout_s:
            return ("joint_states_stale",)
        return ()

    def read_state(self) -> ArmState:
        q = self._q if self._q is not None else np.zeros(self.dof)
        errors = self._errors()
        return ArmState(
            q=q.copy(),
            dq=self._dq.copy(),
            tau_j=self._tau.copy(),
            ee_pose=self._ee_pose(q),
            gripper=GripperState(width=self.width),
            mode=RobotMode.OTHER if errors else RobotMode.MOVE,
            errors=errors,
            stamp=self._stamp,
        )

    # ---- commands out -------------------------------------------------------------------
    def command_joint_positions(self, q: np.ndarray) -> None:
        if self.send_joints is not None:
            self.send_joints(np.asarray(q, dtype=np.float64).copy())
            self.sent += 1

    def command_joint_velocities(self, dq: np.ndarray) -> None:
        """A controller we do not own takes positions: one period of the velocity as a target."""
        if self._q is not None:
            self.command_joint_positions(self._q + np.asarray(dq) * 0.01)

    def hold(self) -> None:
        """Command the measured joints: the stack's controller stops where the arm is."""
        if self._q is not None:
            self.command_joint_positions(self._q)

    def gripper_move(self, width: float, speed: float) -> bool:
        if self.send_gripper is None:
            log.warning(
                "bridge: no gripper command topic configured; gripper move to %.3f m dropped", width
            )
            return False
        return self.send_gripper(width)

    def gripper_grasp(
        self, width: float, speed: float, force: float, epsilon_inner: float, epsilon_outer: float
    ) -> bool:
        return self.gripper_move(width, speed)

    def gripper_homing(self) -> bool:
        return self.gripper_move(PANDA_GRIPPER_MAX_WIDTH, 0.1)

    def recover(self) -> bool:
        """The stack's own recovery (franka_ros2 error_recovery) is not ours to call: report fresh
        state."""
        return not self._errors()


def _matrix(pose: EEPose) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = quat_xyzw_to_matrix(pose.quat_xyzw), pose.position
    return T


def _ee(T: np.ndarray) -> EEPose:
    return EEPose(T[:3, 3].copy(), matrix_to_quat_xyzw(T[:3, :3]))
