"""Controllers: map normalised actions in [-1, 1] to joint position targets.

Both control modes end in a joint target for the position actuators of :mod:`.model`, so the
physics substeps need no Python. End-effector control uses one damped-least-squares step on
the site Jacobian (``mj_jacSite``) per control step, batched over envs with numpy, plus a
null-space pull toward the home posture so the redundant 7th DoF does not drift.

Action layouts (the last entry is always the gripper: -1 closed, +1 fully open):
- ``ee_delta``: ``[dx, dy, dz, droll, dpitch, dyaw, grip]`` — translation scaled by
  ``pos_scale`` metres and rotation by ``rot_scale`` radians per control step (world frame).
- ``ee_delta_pos``: ``[dx, dy, dz, grip]`` — orientation held at its value on reset.
- ``joint_delta``: ``[dq1..dq7, grip]`` scaled by ``joint_scale`` radians per control step.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from sim_bridges.mujoco_franka.model import GRIPPER_MAX_WIDTH, HOME_QPOS, FrankaModel

CONTROL_MODES = ("ee_delta", "ee_delta_pos", "joint_delta")
ACTION_DIMS = {"ee_delta": 7, "ee_delta_pos": 4, "joint_delta": 8}


@dataclass(frozen=True)
class ControlConfig:
    """Scales and gains; defaults let ~10 steps cross the 0.5 m workspace."""

    mode: str = "ee_delta"
    pos_scale: float = 0.05  # m per control step at |a| = 1
    rot_scale: float = 0.25  # rad per control step at |a| = 1
    joint_scale: float = 0.15  # rad per control step at |a| = 1
    damping: float = 0.05  # DLS lambda
    nullspace_gain: float = 0.2

    def __post_init__(self) -> None:
        if self.mode not in CONTROL_MODES:
            raise ValueError(f"control={self.mode!r} is not a control mode; use one of {CONTROL_MODES}")

    @property
    def action_dim(self) -> int:
        return ACTION_DIMS[self.mode]


def gripper_ctrl(action: np.ndarray) -> np.ndarray:
    """Gripper action in [-1, 1] -> finger targets ``[B, 2]`` (each finger moves half the width)."""
    half = (np.asarray(action, dtype=np.float64) + 1.0) * 0.25 * GRIPPER_MAX_WIDTH
    return np.stack([half, -half], axis=-1)


def site_jacobians(fm: FrankaModel, datas: list[mujoco.MjData]) -> np.ndarray:
    """Stacked 6x7 arm Jacobians ``[B, 6, 7]`` (translation rows first) of the EE site."""
    nv = fm.model.nv
    jp, jr = np.zeros((3, nv)), np.zeros((3, nv))
    out = np.empty((len(datas), 6, len(fm.arm_dof)))
    for i, d in enumerate(datas):
        mujoco.mj_jacSite(fm.model, d, jp, jr, fm.ee_site)
        out[i, :3] = jp[:, fm.arm_dof]
        out[i, 3:] = jr[:, fm.arm_dof]
    return out


def orientation_error(target_quat: np.ndarray, current_quat: np.ndarray) -> np.ndarray:
    """Rotation vectors ``[B, 3]`` taking ``current`` to ``target`` (world frame)."""
    out = np.empty((len(target_quat), 3))
    for i in range(len(target_quat)):
        mujoco.mju_subQuat(out[i], target_quat[i], current_quat[i])
    # mju_subQuat gives the error in the current frame; rotate it to world
    for i in range(len(target_quat)):
        mat = np.empty(9)
        mujoco.mju_quat2Mat(mat, current_quat[i])
        out[i] = mat.reshape(3, 3) @ out[i]
    return out


def rotate_quats(quats: np.ndarray, rotvecs: np.ndarray) -> np.ndarray:
    """Apply world-frame rotation vectors to quaternions (wxyz), batched."""
    out = np.empty_like(quats)
    dq = np.empty(4)
    for i in range(len(quats)):
        angle = float(np.linalg.norm(rotvecs[i]))
        if angle < 1e-9:
            out[i] = quats[i]
            continue
        mujoco.mju_axisAngle2Quat(dq, rotvecs[i] / angle, angle)
        mujoco.mju_mulQuat(out[i], dq, quats[i])
    return out


def dls_step(jac: np.ndarray, err: np.ndarray, q: np.ndarray, damping: float,
             nullspace_gain: float) -> np.ndarray:
    """One damped-least-squares IK step ``dq [B, 7]`` with a null-space pull to the home pose."""
    jt = np.swapaxes(jac, 1, 2)
    rows = jac.shape[1]
    jjt = jac @ jt + (damping**2) * np.eye(rows)
    pinv = jt @ np.linalg.inv(jjt)  # [B, 7, rows]
    dq = (pinv @ err[..., None])[..., 0]
    if nullspace_gain > 0:
        null = np.eye(jac.shape[2]) - pinv @ jac
        dq += (null @ (nullspace_gain * (HOME_QPOS - q))[..., None])[..., 0]
    return dq


def arm_targets(cfg: ControlConfig, fm: FrankaModel, datas: list[mujoco.MjData],
                actions: np.ndarray, target_quat: np.ndarray) -> np.ndarray:
    """Joint targets ``[B, 7]`` for normalised ``actions [B, A]`` (gripper column excluded).

    ``target_quat`` [B, 4] is the held EE orientation; it is updated in place for ``ee_delta``.
    """
    q = np.stack([d.qpos[fm.arm_qpos] for d in datas])
    if cfg.mode == "joint_delta":
        tgt = q + cfg.joint_scale * actions[:, :7]
        return np.clip(tgt, fm.arm_lower, fm.arm_upper)
    jac = site_jacobians(fm, datas)
    cur_quat = np.stack([_site_quat(fm, d) for d in datas])
    if cfg.mode == "ee_delta":
        target_quat[:] = rotate_quats(target_quat, cfg.rot_scale * actions[:, 3:6])
    err = np.concatenate(
        [cfg.pos_scale * actions[:, :3], orientation_error(target_quat, cur_quat)], axis=1
    )
    dq = dls_step(jac, err, q, cfg.damping, cfg.nullspace_gain)
    return np.clip(q + dq, fm.arm_lower, fm.arm_upper)


def _site_quat(fm: FrankaModel, d: mujoco.MjData) -> np.ndarray:
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, d.site_xmat[fm.ee_site])
    return quat


def ee_quat(fm: FrankaModel, d: mujoco.MjData) -> np.ndarray:
    """EE site orientation as a unit quaternion (w, x, y, z)."""
    return _site_quat(fm, d)
