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
- ``ee_impedance``: ``[dx, dy, dz, grip]`` moves a Cartesian impedance target; no joint target
  at all: :mod:`.torque_loop` applies the law's torques on every physics substep.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import mujoco
import numpy as np

from rlinf_contracts.control import dls_step as contract_dls_step
from rlinf_contracts.control import ee_joint_targets, joint_joint_targets
from rlinf_contracts.impedance import ImpedanceGains
from rlinf_contracts.spec import ActionSpace
from sim_bridges.mujoco_franka.model import GRIPPER_MAX_WIDTH, HOME_QPOS, FrankaModel

CONTROL_MODES = ("ee_delta", "ee_delta_pos", "joint_delta", "ee_impedance")
ACTION_DIMS = {"ee_delta": 7, "ee_delta_pos": 4, "joint_delta": 8, "ee_impedance": 4}


@dataclass(frozen=True)
class ControlConfig:
    """Scales and gains; defaults let ~10 steps cross the 0.5 m workspace."""

    mode: str = "ee_delta"
    pos_scale: float = 0.05  # m per control step at |a| = 1
    rot_scale: float = 0.25  # rad per control step at |a| = 1
    joint_scale: float = 0.1  # rad per control step at |a| = 1 (2 rad/s at 20 Hz)
    damping: float = 0.05  # DLS lambda
    nullspace_gain: float = 0.2
    max_joint_speed: float = 1.0  # fraction of the Franka joint speed limits a step may command
    control_hz: float = 20.0  # the period the speed limit applies to
    impedance: ImpedanceGains | None = None  # ee_impedance gains (None: the defaults)

    def __post_init__(self) -> None:
        if self.mode not in CONTROL_MODES:
            raise ValueError(
                f"control={self.mode!r} is not a control mode; use one of {CONTROL_MODES}"
            )

    @property
    def action_dim(self) -> int:
        return ACTION_DIMS[self.mode]

    @functools.cached_property
    def action_space(self) -> ActionSpace:
        """These scales and gains as the robot spec's action space (what a robot must replay)."""
        return ActionSpace(
            self.mode,
            self.action_dim,
            1,
            pos_scale=self.pos_scale,
            rot_scale=self.rot_scale,
            joint_scale=self.joint_scale,
            ik_damping=self.damping,
            nullspace_gain=self.nullspace_gain,
            max_joint_speed=self.max_joint_speed,
            impedance=self.impedance if self.mode == "ee_impedance" else None,
        )


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


def dls_step(
    jac: np.ndarray, err: np.ndarray, q: np.ndarray, damping: float, nullspace_gain: float
) -> np.ndarray:
    """One damped-least-squares IK step ``dq [B, 7]`` with a null-space pull to this model's
    home."""
    return contract_dls_step(jac, err, q, damping, nullspace_gain, HOME_QPOS)


def arm_targets(
    cfg: ControlConfig,
    fm: FrankaModel,
    datas: list[mujoco.MjData],
    actions: np.ndarray,
    target_rot: np.ndarray,
    q: np.ndarray | None = None,
    rot: np.ndarray | None = None,
) -> np.ndarray:
    """Joint targets ``[B, 7]`` for normalised ``actions [B, A]`` (gripper column excluded).

    ``target_rot`` [B, 3, 3] is the held EE orientation; ``ee_delta`` rotates it in place.
    ``q`` [B, 7] and ``rot`` [B, 3, 3] (EE rotation), when the caller already gathered them
    from ``datas``, save reading them again.
    """
    if q is None:
        q = np.stack([d.qpos[fm.q_slice] for d in datas])
    if cfg.mode == "joint_delta":
        return joint_joint_targets(
            cfg.action_space, actions, q, fm.arm_lower, fm.arm_upper, cfg.control_hz
        )
    rot = site_rotations(fm, datas) if rot is None else rot
    return ee_joint_targets(
        cfg.action_space,
        actions,
        q,
        rot,
        site_jacobians(fm, datas),
        target_rot,
        HOME_QPOS,
        fm.arm_lower,
        fm.arm_upper,
        cfg.control_hz,
    )
