"""Observations and actions of a robot on ROS 2, built from its robot spec (no ROS imports here).

Why one module for the policy client node and :class:`~rlinf_ros.ros_robot_env.RosRobotEnv`:
both turn topic data into the state vector a policy was trained on and turn the policy's
actions into joint targets. Both do it through the spec (``rlinf_contracts.features`` for the
state, ``rlinf_contracts.control`` for actions — the same code the simulator uses), so a
checkpoint trained in simulation means the same thing on the ROS 2 twin and on a real arm.

The robot reports poses in its base frame; the spec's ``base_position`` shifts Cartesian
features into the frame the policy saw. End-effector actions need a Jacobian: it comes from the
numpy Franka kinematics (``robot_drivers.kinematics``) evaluated at the *reported* end-effector
point, so it matches whatever point the robot publishes (hand TCP, a simulator site, ...).

``ee_impedance`` actions become end-effector *target poses* (:class:`ArmTargets.poses`, base
frame) instead of joint targets: the robot's torque loop (or a compliant controller) tracks
them with the spec's gains.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rlinf_contracts.control import ActionDecoder, ImpedanceTargetDecoder
from rlinf_contracts.features import MissingInput, RobotReading, build_state
from rlinf_contracts.rotations import quat_xyzw_to_matrix
from rlinf_contracts.spec import ACTION_DIMS, RobotSpec
from robot_drivers.kinematics import forward_kinematics, joint_frames
from robot_drivers.types import PANDA_HOME

ARM_DOF = 7


@dataclass
class ArmTargets:
    """One control step for every arm: joint targets [7] and gripper widths (m); for
    ``ee_impedance`` the target poses (4x4, base frame) that replace the joint targets (which
    then are the measured joints, for the record only)."""

    joints: list[np.ndarray]
    grippers: list[float]
    poses: list[np.ndarray] | None = None


def point_jacobian(q: np.ndarray, point: np.ndarray) -> np.ndarray:
    """6x7 geometric Jacobian (linear rows first, base frame) of the point ``point`` rigidly
    attached to the last link, at joints ``q``."""
    frames = joint_frames(np.asarray(q, dtype=np.float64))
    jac = np.zeros((6, ARM_DOF))
    for i in range(ARM_DOF):
        z, p = frames[i][:3, 2], frames[i][:3, 3]
        jac[:3, i] = np.cross(z, np.asarray(point) - p)
        jac[3:, i] = z
    return jac


def reading_from_pose(
    q: np.ndarray,
    dq: np.ndarray | None,
    gripper: float,
    position: np.ndarray | None,
    quat_xyzw: np.ndarray | None,
    **task: Any,
) -> RobotReading:
    """A :class:`RobotReading` from joint states, a gripper width and an end-effector pose."""
    rot = (
        None if quat_xyzw is None else quat_xyzw_to_matrix(np.asarray(quat_xyzw, dtype=np.float64))
    )
    return RobotReading(
        q=np.asarray(q, dtype=np.float64),
        dq=np.zeros(ARM_DOF) if dq is None else np.asarray(dq, dtype=np.float64),
        ee_pos=None if position is None else np.asarray(position, dtype=np.float64),
        ee_rot=rot,
        gripper_width=float(gripper),
        **task,
    )


class SpecIO:
    """The robot side of one robot spec: observation maps in, joint targets out."""

    def __init__(self, spec: RobotSpec) -> None:
        self.spec = spec
        per_arm = spec.action.dim // spec.arms
        if per_arm != ACTION_DIMS[spec.action.control]:
            raise ValueError(
                f"robot spec: {spec.arms} arm(s) with {spec.action.control} need action.dim "
                f"{spec.arms * ACTION_DIMS[spec.action.control]}, got {spec.action.dim}"
            )
        arm_space = replace(spec.action, dim=per_arm)
        home = np.asarray(spec.home or PANDA_HOME, dtype=np.float64)
        self.per_arm = per_arm
        # ee_impedance: target poses for a torque loop; every other mode: joint targets
        self.impedance = spec.action.control == "ee_impedance"
        self.pose_decoders = (
            [ImpedanceTargetDecoder(arm_space) for _ in range(spec.arms)] if self.impedance else []
        )
        self.decoders = (
            []
            if self.impedance
            else [ActionDecoder(arm_space, home, spec.control_hz) for _ in range(spec.arms)]
        )

    # ---- observations ----------------------------------------------------------------------
    def observation(
        self, readings: list[RobotReading], images: dict[str, np.ndarray], instruction: str = ""
    ) -> dict[str, Any]:
        """One canonical (unbatched) observation; raises ``MissingInput`` naming a missing topic."""
        return {
            "state": build_state(self.spec, readings),
            "images": images,
            "instruction": instruction or self.spec.instruction,
        }

    # ---- actions ---------------------------------------------------------------------------
    def begin_episode(self, readings: list[RobotReading] | None = None) -> None:
        """Forget held orientation targets; they are re-taken from the next measured pose."""
        for k, dec in enumerate([*self.decoders, *self.pose_decoders]):
            dec.reset(None if readings is None else readings[k].ee_rot)

    def hold_poses(self, readings: list[RobotReading]) -> list[np.ndarray] | None:
        """``ee_impedance``: the measured poses as targets (hold still); None without a pose."""
        if not self.impedance or any(r.ee_pos is None or r.ee_rot is None for r in readings):
            return None
        out = []
        for r in readings:
            pose = np.eye(4)
            pose[:3, :3], pose[:3, 3] = r.ee_rot, r.ee_pos
            out.append(pose)
        return out

    def decode(self, chunk: np.ndarray, readings: list[RobotReading]) -> list[ArmTargets]:
        """Action chunk ``[H, A]`` -> one :class:`ArmTargets` per step, integrated from
        ``readings``.

        Step 1 uses the measured joints and pose; later steps of a chunk continue from the
        previous target, with the pose predicted by forward kinematics relative to the measured
        one (the chunk is executed open loop, as in training).
        """
        chunk = np.asarray(chunk, dtype=np.float64)
        if chunk.ndim != 2 or chunk.shape[1] != self.spec.action.dim:
            raise ValueError(
                f"policy actions must be [chunk, {self.spec.action.dim}] for "
                f"{self.spec.arms} arm(s) ({self.spec.action.control}), got "
                f"{list(chunk.shape)}"
            )
        if not np.all(np.isfinite(chunk)):
            raise ValueError("policy actions contain NaN/inf")
        if self.impedance:
            return self._decode_poses(chunk, readings)
        states = [_ArmTrack(r) for r in readings]
        for dec, st in zip(self.decoders, states):
            if dec.needs_jacobian and (st.pos is None or st.rot is None):
                # a command can arrive (e.g. from teleop) before the robot's first pose report
                raise MissingInput(
                    f"{self.spec.action.control} actions need the end-effector pose; nothing has "
                    "reported it yet (robot current_pose topic)"
                )
        out = []
        for row in np.clip(chunk, -1.0, 1.0):
            joints, widths = [], []
            for k, (dec, st) in enumerate(zip(self.decoders, states)):
                a = row[k * self.per_arm : (k + 1) * self.per_arm]
                jac = None
                if dec.needs_jacobian:  # st.pos is set: without it, MissingInput was raised above
                    jac = point_jacobian(st.q, st.pos)  # type: ignore[arg-type]  # see above
                target, width = dec.decode(a, st.q, st.rot, jac)
                st.advance(target)
                joints.append(target)
                widths.append(width)
            out.append(ArmTargets(joints, widths))
        return out

    def _decode_poses(self, chunk: np.ndarray, readings: list[RobotReading]) -> list[ArmTargets]:
        """``ee_impedance``: step 1's target is :func:`~rlinf_contracts.impedance.step_target`
        of the measured position; later steps of a chunk (open loop) start from the previous
        target, as if the arm had reached it."""
        pos, rot = [], []
        for r in readings:
            if r.ee_pos is None or r.ee_rot is None:
                raise MissingInput(
                    "ee_impedance actions need the end-effector pose; nothing has reported it "
                    "yet (robot current_pose topic)"
                )
            pos.append(np.asarray(r.ee_pos, dtype=np.float64))
            rot.append(np.asarray(r.ee_rot, dtype=np.float64))
        joints = [np.asarray(r.q, dtype=np.float64).copy() for r in readings]
        out = []
        for row in np.clip(chunk, -1.0, 1.0):
            poses, widths = [], []
            for k, dec in enumerate(self.pose_decoders):
                pose, width = dec.decode(
                    row[k * self.per_arm : (k + 1) * self.per_arm], pos[k], rot[k]
                )
                pos[k] = pose[:3, 3]
                poses.append(pose)
                widths.append(width)
            out.append(ArmTargets([j.copy() for j in joints], widths, poses))
        return out


class _ArmTrack:
    """Joints and end-effector pose of one arm while a chunk is integrated open loop."""

    def __init__(self, r: RobotReading) -> None:
        self.q = np.asarray(r.q, dtype=np.float64).copy()
        self.pos = None if r.ee_pos is None else np.asarray(r.ee_pos, dtype=np.float64)
        self.rot = None if r.ee_rot is None else np.asarray(r.ee_rot, dtype=np.float64)
        self._measured = forward_kinematics(self.q) if self.pos is not None else None

    def advance(self, q_next: np.ndarray) -> None:
        if self.pos is not None and self.rot is not None and self._measured is not None:
            # the reported point is rigid on the last link: P' = F(q_next) F(q)^-1 P
            pose = np.eye(4)
            pose[:3, :3], pose[:3, 3] = self.rot, self.pos
            moved = forward_kinematics(q_next)
            pose = moved @ np.linalg.solve(self._measured, pose)
            self.rot, self.pos = pose[:3, :3], pose[:3, 3]
            self._measured = moved
        self.q = np.asarray(q_next, dtype=np.float64).copy()
