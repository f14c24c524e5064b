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

from rlinf_contracts.rotations import orientation_error, rotvec_to_matrix
from sim_bridges.mujoco_franka.model import GRIPPER_MAX_WIDTH, HOME_QPOS, FrankaModel

CONTROL_MODES = ("ee_delta", "ee_delta_pos", "joint_delta")
ACTION_DIMS = {"ee_delta": 7, "ee_delta_pos": 4, "joint_delta": 8}


@dataclass(frozen=True)
class ControlConfig:
    """Scales and gains; defaults let ~10 steps cross the 0.5 m workspace."""

    mode: str = "ee_delta"
    pos_scale: float = 0.05  # m per control step at |a| = 1
    rot_scale: float = 0.25  # rad per control step at |a| = 1
    joint_scale: float = 0.1  # rad per control step at |a| = 1 (2 rad/s at 20 Hz)
    damping: float = 0.05  # DLS lambda
    nullspace_gain: float = 0.2

    def __post_init__(self) -> None:
        if self.mode not in CONTROL_MODES:
            raise ValueError(f"control={self.mode!r} is not a control mode; use one of {CONTROL_MODES}")

    @property
    def action_dim(self) -> int:
        return ACTION_DIMS[self.mode]


_EYES = {n: np.eye(n) for n in (3, 6, 7)}


def _eye(n: int) -> np.ndarray:
    """Cached identity (read-only use): ``np.eye`` each control step is measurable overhead."""
    return _EYES[n] if n in _EYES else np.eye(n)


def gripper_ctrl(action: np.ndarray) -> np.ndarray:
    """Gripper action in [-1, 1] -> finger targets ``[B, 2]`` (each finger moves half the width)."""
    half = (np.asarray(action, dtype=np.float64) + 1.0) * 0.25 * GRIPPER_MAX_WIDTH
    return np.stack([half, -half], axis=-1)


def site_jacobians(fm: FrankaModel, datas: list[mujoco.MjData]) -> np.ndarray:
    """Stacked 6x7 arm Jacobians ``[B, 6, 7]`` (translation rows first) of the EE site."""
    nv = fm.model.nv
    full = np.zeros((len(datas), 6, nv))
    for i, d in enumerate(datas):
        mujoco.mj_jacSite(fm.model, d, full[i, :3], full[i, 3:], fm.ee_site)
    return full[:, :, fm.arm_dof]


def site_rotations(fm: FrankaModel, datas: list[mujoco.MjData]) -> np.ndarray:
    """EE site rotation matrices ``[B, 3, 3]`` (world from site)."""
    return np.stack([d.site_xmat[fm.ee_site] for d in datas]).reshape(-1, 3, 3)


def dls_step(jac: np.ndarray, err: np.ndarray, q: np.ndarray, damping: float,
             nullspace_gain: float) -> np.ndarray:
    """One damped-least-squares IK step ``dq [B, 7]`` with a null-space pull to the home pose."""
    jt = np.swapaxes(jac, 1, 2)
    rows = jac.shape[1]
    jjt = jac @ jt + (damping**2) * _eye(rows)
    pinv = np.swapaxes(np.linalg.solve(jjt, jac), 1, 2)  # J^T (J J^T + l^2 I)^-1, [B, 7, rows]
    dq = (pinv @ err[..., None])[..., 0]
    if nullspace_gain > 0:
        null = _eye(jac.shape[2]) - pinv @ jac
        dq += (null @ (nullspace_gain * (HOME_QPOS - q))[..., None])[..., 0]
    return dq


def arm_targets(cfg: ControlConfig, fm: FrankaModel, datas: list[mujoco.MjData],
                actions: np.ndarray, target_rot: np.ndarray, q: np.ndarray | None = None,
                rot: np.ndarray | None = None) -> np.ndarray:
    """Joint targets ``[B, 7]`` for normalised ``actions [B, A]`` (gripper column excluded).

    ``target_rot`` [B, 3, 3] is the held EE orientation; ``ee_delta`` rotates it in place.
    ``q`` [B, 7] and ``rot`` [B, 3, 3] (EE rotation), when the caller already gathered them
    from ``datas``, save reading them again.
    """
    if q is None:
        q = np.stack([d.qpos[fm.q_slice] for d in datas])
    if cfg.mode == "joint_delta":
        tgt = q + cfg.joint_scale * actions[:, :7]
        return np.clip(tgt, fm.arm_lower, fm.arm_upper)
    jac = site_jacobians(fm, datas)
    if cfg.mode == "ee_delta":
        target_rot[:] = rotvec_to_matrix(cfg.rot_scale * actions[:, 3:6]) @ target_rot
    err = np.concatenate(
        [cfg.pos_scale * actions[:, :3], orientation_error(target_rot, site_rotations(fm, datas) if rot is None else rot)],
        axis=1,
    )
    dq = dls_step(jac, err, q, cfg.damping, cfg.nullspace_gain)
    return np.clip(q + dq, fm.arm_lower, fm.arm_upper)


def ee_quat(fm: FrankaModel, d: mujoco.MjData) -> np.ndarray:
    """EE site orientation as a unit quaternion (w, x, y, z)."""
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, d.site_xmat[fm.ee_site])
    return quat
