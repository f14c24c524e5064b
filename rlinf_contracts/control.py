"""What an action means: one control law from normalised actions to joint targets, for every side.

Why here, in the bottom room: the simulator (with MuJoCo's Jacobian) and the ROS policy client
or robot env (with the numpy Franka kinematics) must turn the same action into the same joint
target, or a policy trained in simulation does something else on the robot. Both call
:class:`ActionDecoder`; only the Jacobian source differs.

Control modes (``ActionSpace.control``; the last entry is always the gripper, -1 closed, +1 open):

- ``ee_delta``: ``[dx, dy, dz, droll, dpitch, dyaw, grip]`` — translation ``pos_scale`` m and
  rotation ``rot_scale`` rad per step at |a| = 1, in the base frame. The orientation target is
  *held* across steps (rotated by each action), so the end effector does not drift.
- ``ee_delta_pos``: ``[dx, dy, dz, grip]`` — orientation held at its value when the episode began.
- ``joint_delta``: ``[dq1..dq7, grip]`` — ``joint_scale`` rad per step at |a| = 1.
- ``joint_position``: ``[q1..q7, grip]`` — [-1, 1] mapped onto the joint limits.

``ee_impedance`` (``[dx, dy, dz, grip]``) is not decoded to joint targets: it moves a Cartesian
impedance target that a torque loop tracks with :func:`rlinf_contracts.impedance.impedance_torques`.
:class:`ImpedanceTargetDecoder` turns such an action into that target pose (position from
:func:`~rlinf_contracts.impedance.step_target` on the measured position, orientation held from
the episode's start), as the simulator's torque loop sets it.

End-effector modes take one damped-least-squares step on the Jacobian per control step, plus a
null-space pull toward ``home`` so the redundant 7th joint does not drift.
"""

from __future__ import annotations

import numpy as np

from rlinf_contracts.impedance import step_target
from rlinf_contracts.rotations import orientation_error, rotvec_to_matrix
from rlinf_contracts.spec import ActionSpace, SpecError

GRIPPER_MAX_WIDTH = 0.08  # m, Franka Hand
PANDA_Q_MIN = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
PANDA_Q_MAX = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
PANDA_DQ_MAX = np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61])  # rad/s, Franka datasheet


def speed_limited(
    q: np.ndarray, target: np.ndarray, space: ActionSpace, control_hz: float
) -> np.ndarray:
    """``target [B, 7]`` pulled toward ``q`` so no joint moves faster than
    ``space.max_joint_speed`` x the Franka limits in one control period (whole move scaled, so
    the direction is kept). The simulator and the robot apply the same limit: a policy never
    learns motions the real arm cannot make."""
    if space.max_joint_speed <= 0:
        return target
    step = space.max_joint_speed * PANDA_DQ_MAX / control_hz
    over = np.max(np.abs(target - q) / step, axis=-1, keepdims=True)
    return q + (target - q) / np.maximum(over, 1.0)


def gripper_width(action: np.ndarray | float, max_width: float = GRIPPER_MAX_WIDTH) -> np.ndarray:
    """Gripper action in [-1, 1] -> opening width in metres (0 closed .. ``max_width``)."""
    return (np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0) + 1.0) * 0.5 * max_width


_EYES: dict[int, np.ndarray] = {}


def _eye(n: int) -> np.ndarray:
    """Cached identity (read-only use): ``np.eye`` per control step is measurable overhead."""
    if n not in _EYES:
        _EYES[n] = np.eye(n)
    return _EYES[n]


def dls_step(
    jac: np.ndarray,
    err: np.ndarray,
    q: np.ndarray,
    damping: float,
    nullspace_gain: float,
    home: np.ndarray,
) -> np.ndarray:
    """One damped-least-squares IK step ``dq [B, 7]`` with a null-space pull toward ``home``.

    ``jac [B, rows, 7]``, ``err [B, rows]``, ``q [B, 7]``: ``dq = J^T (J J^T + l^2 I)^-1 err
    + (I - J^+ J) k (home - q)``.
    """
    jt = np.swapaxes(jac, 1, 2)
    rows, dof = jac.shape[1], jac.shape[2]
    jjt = jac @ jt + (damping**2) * _eye(rows)
    pinv = np.swapaxes(np.linalg.solve(jjt, jac), 1, 2)  # [B, dof, rows]
    dq = (pinv @ err[..., None])[..., 0]
    if nullspace_gain > 0:
        null = _eye(dof) - pinv @ jac
        dq += (null @ (nullspace_gain * (np.asarray(home) - q))[..., None])[..., 0]
    return dq


def ee_joint_targets(
    space: ActionSpace,
    actions: np.ndarray,
    q: np.ndarray,
    rot: np.ndarray,
    jac: np.ndarray,
    target_rot: np.ndarray,
    home: np.ndarray,
    lower: np.ndarray = PANDA_Q_MIN,
    upper: np.ndarray = PANDA_Q_MAX,
    control_hz: float = 20.0,
) -> np.ndarray:
    """Joint targets ``[B, 7]`` for end-effector ``actions [B, A]`` (gripper column ignored).

    ``rot [B, 3, 3]`` is the measured end-effector rotation, ``jac [B, 6, 7]`` its Jacobian
    (translation rows first) and ``target_rot [B, 3, 3]`` the held orientation, which
    ``ee_delta`` rotates *in place*.
    """
    if space.control == "ee_delta":
        target_rot[:] = rotvec_to_matrix(space.rot_scale * actions[:, 3:6]) @ target_rot
    err = np.concatenate(
        [space.pos_scale * actions[:, :3], orientation_error(target_rot, rot)], axis=1
    )
    dq = dls_step(jac, err, q, space.ik_damping, space.nullspace_gain, home)
    return np.clip(speed_limited(q, q + dq, space, control_hz), lower, upper)


def joint_joint_targets(
    space: ActionSpace,
    actions: np.ndarray,
    q: np.ndarray,
    lower: np.ndarray = PANDA_Q_MIN,
    upper: np.ndarray = PANDA_Q_MAX,
    control_hz: float = 20.0,
) -> np.ndarray:
    """Joint targets ``[B, 7]`` for joint-space ``actions [B, 8]``."""
    if space.control == "joint_delta":
        target = q + space.joint_scale * actions[:, :7]
    else:
        target = lower + (np.clip(actions[:, :7], -1.0, 1.0) + 1.0) / 2.0 * (upper - lower)
    return np.clip(speed_limited(q, target, space, control_hz), lower, upper)


class ActionDecoder:
    """Per-episode decoder of one arm's actions: holds the orientation target between steps.

    Call :meth:`reset` with the measured end-effector rotation when an episode begins, then
    :meth:`decode` once per control step with the current joints, rotation and Jacobian.
    """

    def __init__(self, space: ActionSpace, home: np.ndarray, control_hz: float = 20.0) -> None:
        space.validate()
        if space.control == "ee_impedance":
            raise SpecError(
                "action.control='ee_impedance' is applied by a torque loop "
                "(rlinf_contracts.impedance), not decoded to joint targets"
            )
        self.space = space
        self.control_hz = control_hz
        self.home = np.asarray(home, dtype=np.float64)
        self.target_rot: np.ndarray | None = None

    @property
    def needs_jacobian(self) -> bool:
        return self.space.control.startswith("ee_")

    def reset(self, rot: np.ndarray | None) -> None:
        self.target_rot = (
            None if rot is None else np.asarray(rot, dtype=np.float64).reshape(1, 3, 3).copy()
        )

    def decode(
        self,
        action: np.ndarray,
        q: np.ndarray,
        rot: np.ndarray | None = None,
        jac: np.ndarray | None = None,
    ) -> tuple[np.ndarray, float]:
        """(joint target [7], gripper width m) for one action row of this arm."""
        a = np.clip(np.asarray(action, dtype=np.float64).reshape(1, -1), -1.0, 1.0)
        q = np.asarray(q, dtype=np.float64).reshape(1, 7)
        width = float(gripper_width(a[0, -1]))
        if not self.needs_jacobian:
            return joint_joint_targets(self.space, a, q, control_hz=self.control_hz)[0], width
        if rot is None or jac is None:
            raise ValueError(
                f"{self.space.control} actions need the end-effector rotation and Jacobian"
            )
        if self.target_rot is None:  # as reset(rot), which pyright cannot see sets it
            self.target_rot = np.asarray(rot, dtype=np.float64).reshape(1, 3, 3).copy()
        target = ee_joint_targets(
            self.space,
            a,
            q,
            np.asarray(rot).reshape(1, 3, 3),
            np.asarray(jac).reshape(1, 6, 7),
            self.target_rot,
            self.home,
            control_hz=self.control_hz,
        )
        return target[0], width


class ImpedanceTargetDecoder:
    """Per-episode decoder of one arm's ``ee_impedance`` actions into impedance target poses.

    The position target is :func:`~rlinf_contracts.impedance.step_target` of the measured
    end-effector position; the orientation target is held at the measured orientation when the
    episode began (:meth:`reset`, else the first decoded step), as the simulator holds it.
    """

    def __init__(self, space: ActionSpace) -> None:
        space.validate()
        if space.control != "ee_impedance":
            raise SpecError(
                f"action.control={space.control!r}: impedance targets are for 'ee_impedance'"
            )
        self.space = space
        self.target_rot: np.ndarray | None = None

    def reset(self, rot: np.ndarray | None) -> None:
        self.target_rot = None if rot is None else np.asarray(rot, dtype=np.float64).copy()

    def decode(
        self, action: np.ndarray, pos: np.ndarray, rot: np.ndarray
    ) -> tuple[np.ndarray, float]:
        """(target pose 4x4 in the frame of ``pos`` / ``rot``, gripper width m) for one action
        row ``[dx, dy, dz, grip]`` at the measured end-effector position ``pos`` [3] and
        rotation ``rot`` [3, 3]."""
        a = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), -1.0, 1.0)
        if self.target_rot is None:
            self.target_rot = np.asarray(rot, dtype=np.float64).reshape(3, 3).copy()
        pose = np.eye(4)
        pose[:3, :3] = self.target_rot
        pose[:3, 3] = step_target(np.asarray(pos).reshape(3), a[:3], self.space.pos_scale)
        return pose, float(gripper_width(a[-1]))
