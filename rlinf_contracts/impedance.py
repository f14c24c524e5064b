"""Cartesian impedance (operational-space) control law: end-effector target -> joint torques.

Why here, in the bottom room, numpy only: the MuJoCo simulator applies these torques on every
physics substep and a libfranka torque loop applies the same function at 1 kHz on the robot.
A policy trained against one compliance must meet the same compliance on the other side, so
there is one law with its gains carried in the robot spec (``ActionSpace.impedance``), as
:mod:`rlinf_contracts.control` is the one law for position-controlled modes.

The law (per arm, batched over a leading dimension)::

    e      = [p* - p, log(R* R^T)]                  pose error, world frame (6)
    F      = K e - D J dq                           Cartesian wrench, D = 2 sqrt(K) by default
    F      clamped: |F_xyz| <= max_force, |F_rot| <= max_moment (direction kept)
    tau    = J^T F + N (k_n (q_home - q) - d_n dq)  N = I - J^T J#^T, the null-space projector
    tau    clamped to the joint torque limits, then to max_torque_rate * dt from the last tau

``J#`` is the dynamically consistent pseudo-inverse ``M^-1 J^T (J M^-1 J^T)^-1`` when the mass
matrix is given, else the damped pseudo-inverse ``J^T (J J^T + l^2 I)^-1``. Gravity (and, if
wanted, Coriolis) compensation is *not* part of the output: Franka's firmware adds gravity to a
commanded torque, and the simulator adds MuJoCo's bias force, so each backend adds its own.

The clamp order keeps a command inside the torque box: the rate limit moves from a previous
command (inside the box) toward a clamped one (inside the box), so it stays inside.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.rotations import orientation_error

# Franka Panda / FR3 joint torque limits (Nm) and the rate limit of its torque interface
FRANKA_TAU_MAX = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)
FRANKA_TAU_RATE_MAX = 1000.0  # Nm/s (libfranka: 1 Nm per 1 ms cycle)


@dataclass(frozen=True)
class ImpedanceGains:
    """Gains and limits of :func:`impedance_torques`. ``None`` dampings become the critical
    value ``2 sqrt(k)`` (for a unit mass, the convention of libfranka's impedance example)."""

    stiffness_pos: float = 1000.0  # N/m, translational
    stiffness_rot: float = 60.0  # Nm/rad, rotational
    damping_pos: float | None = None  # Ns/m
    damping_rot: float | None = None  # Nms/rad
    nullspace_stiffness: float = 10.0  # Nm/rad toward the home posture
    nullspace_damping: float | None = None  # Nms/rad
    max_force: float = 40.0  # N, norm of the commanded force
    max_moment: float = 10.0  # Nm, norm of the commanded moment
    max_torque_rate: float = FRANKA_TAU_RATE_MAX  # Nm/s; 0 = no rate limit
    joint_torque_limits: tuple[float, ...] = FRANKA_TAU_MAX  # Nm, per joint
    pinv_damping: float = 0.05  # l of the damped pseudo-inverse (no mass matrix)

    def __post_init__(self) -> None:
        crit = (
            ("damping_pos", "stiffness_pos"),
            ("damping_rot", "stiffness_rot"),
            ("nullspace_damping", "nullspace_stiffness"),
        )
        for damp, stiff in crit:
            k = getattr(self, stiff)
            if getattr(self, damp) is None and isinstance(k, (int, float)) and k >= 0:
                object.__setattr__(self, damp, 2.0 * math.sqrt(k))
        object.__setattr__(
            self, "joint_torque_limits", tuple(float(x) for x in self.joint_torque_limits)
        )

    def validate(self, prefix: str = "action.impedance") -> ImpedanceGains:
        """Raise :class:`ConfigError` naming ``<prefix>.<key>`` for a gain no controller can use;
        returns ``self`` so a caller can chain it."""
        for f in fields(self):
            value = getattr(self, f.name)
            values = value if isinstance(value, tuple) else (value,)
            for v in values:
                if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                    raise ConfigError(f"{prefix}.{f.name}={value!r}: must be a finite number >= 0")
        for name in ("max_force", "max_moment"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{prefix}.{name}={getattr(self, name)!r}: must be > 0")
        if len(self.joint_torque_limits) != 7 or min(self.joint_torque_limits) <= 0:
            raise ConfigError(
                f"{prefix}.joint_torque_limits={list(self.joint_torque_limits)}: "
                "give 7 limits > 0 (Nm), one per joint"
            )
        return self

    @classmethod
    def from_dict(cls, d: Any, prefix: str = "action.impedance") -> ImpedanceGains:
        """Gains from a config / wire map (``None`` = defaults); unknown keys name the known
        ones. The result is validated."""
        if d is None:
            return cls().validate(prefix)
        if isinstance(d, ImpedanceGains):
            return d.validate(prefix)
        if not isinstance(d, dict):
            raise ConfigError(f"{prefix} must be a map of gains, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"unknown key(s) {prefix}.{unknown}; known: {sorted(known)}")
        kw = dict(d)
        if "joint_torque_limits" in kw:
            kw["joint_torque_limits"] = tuple(kw["joint_torque_limits"])
        return cls(**kw).validate(prefix)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["joint_torque_limits"] = list(self.joint_torque_limits)
        return out

    @property
    def stiffness(self) -> np.ndarray:
        """Diagonal of K, ``[kp, kp, kp, kr, kr, kr]``."""
        return np.repeat([self.stiffness_pos, self.stiffness_rot], 3)

    @property
    def damping(self) -> np.ndarray:
        """Diagonal of D (dampings are resolved to numbers on construction)."""
        return np.repeat([float(self.damping_pos or 0.0), float(self.damping_rot or 0.0)], 3)


def clamp_norm(v: np.ndarray, limit: float) -> np.ndarray:
    """``v [..., n]`` scaled down (direction kept) so that each row's norm is <= ``limit``."""
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    return v * np.minimum(1.0, limit / np.maximum(norm, 1e-12))


def nullspace_projector(
    jac: np.ndarray, mass: np.ndarray | None = None, pinv_damping: float = 0.05
) -> np.ndarray:
    """Torque null-space projector ``N = I - J^T J#^T`` ``[B, n, n]`` for ``jac [B, 6, n]``:
    torques ``N tau`` cause no end-effector acceleration (with ``mass``) or no first-order
    end-effector wrench interference (damped pseudo-inverse, without it)."""
    jt = np.swapaxes(jac, -1, -2)
    n = jac.shape[-1]
    if mass is not None:
        minv_jt = np.linalg.solve(mass, jt)  # [B, n, 6]
        lam_inv = jac @ minv_jt  # J M^-1 J^T
        jsharp = np.swapaxes(np.linalg.solve(lam_inv, np.swapaxes(minv_jt, -1, -2)), -1, -2)
    else:
        jjt = jac @ jt + (pinv_damping**2) * np.eye(jac.shape[-2])
        jsharp = np.swapaxes(np.linalg.solve(jjt, jac), -1, -2)  # J^T (J J^T + l^2)^-1
    return np.eye(n) - jt @ np.swapaxes(jsharp, -1, -2)


def impedance_torques(
    gains: ImpedanceGains,
    q: np.ndarray,
    dq: np.ndarray,
    pos: np.ndarray,
    rot: np.ndarray,
    jac: np.ndarray,
    target_pos: np.ndarray,
    target_rot: np.ndarray,
    home: np.ndarray,
    mass: np.ndarray | None = None,
    tau_prev: np.ndarray | None = None,
    dt: float = 0.001,
) -> np.ndarray:
    """Joint torques ``[B, 7]`` (or ``[7]`` for unbatched inputs) of the law in the module
    docstring, gravity compensation excluded.

    ``q``, ``dq`` ``[B, 7]``; ``pos`` ``[B, 3]`` and ``rot`` ``[B, 3, 3]`` the measured
    end-effector pose and ``jac`` ``[B, 6, 7]`` its Jacobian (translation rows first), all in
    one frame; ``target_pos`` / ``target_rot`` the impedance target; ``home`` ``[7]`` the
    null-space posture; ``mass`` ``[B, 7, 7]`` optional; ``tau_prev`` the last command, for the
    rate limit over one cycle of ``dt`` seconds (``None``: no rate limit this cycle).
    """
    single = np.ndim(q) == 1
    q2 = np.atleast_2d(np.asarray(q, dtype=np.float64))
    dq2 = np.atleast_2d(np.asarray(dq, dtype=np.float64))
    b = q2.shape[0]
    jac3 = np.asarray(jac, dtype=np.float64).reshape(b, 6, -1)
    err = np.concatenate(
        [
            np.asarray(target_pos, dtype=np.float64).reshape(b, 3)
            - np.asarray(pos, dtype=np.float64).reshape(b, 3),
            orientation_error(
                np.asarray(target_rot, dtype=np.float64).reshape(b, 3, 3),
                np.asarray(rot, dtype=np.float64).reshape(b, 3, 3),
            ),
        ],
        axis=1,
    )
    vel = (jac3 @ dq2[..., None])[..., 0]
    wrench = gains.stiffness * err - gains.damping * vel
    wrench = np.concatenate(
        [clamp_norm(wrench[:, :3], gains.max_force), clamp_norm(wrench[:, 3:], gains.max_moment)],
        axis=1,
    )
    tau = (np.swapaxes(jac3, 1, 2) @ wrench[..., None])[..., 0]
    if gains.nullspace_stiffness > 0 or (gains.nullspace_damping or 0.0) > 0:
        m = None if mass is None else np.asarray(mass, dtype=np.float64).reshape(b, 7, 7)
        proj = nullspace_projector(jac3, m, gains.pinv_damping)
        posture = gains.nullspace_stiffness * (np.asarray(home, dtype=np.float64) - q2)
        posture = posture - float(gains.nullspace_damping or 0.0) * dq2
        tau = tau + (proj @ posture[..., None])[..., 0]
    limits = np.asarray(gains.joint_torque_limits)
    tau = np.clip(tau, -limits, limits)
    if tau_prev is not None and gains.max_torque_rate > 0:
        prev = np.asarray(tau_prev, dtype=np.float64).reshape(b, -1)
        step = gains.max_torque_rate * dt
        tau = prev + np.clip(tau - prev, -step, step)
    return tau[0] if single else tau


def step_target(pos: np.ndarray, action_xyz: np.ndarray, pos_scale: float) -> np.ndarray:
    """The impedance target of an ``ee_impedance`` action: the *measured* end-effector position
    moved by ``pos_scale`` m per unit action (clipped to [-1, 1]). Relative to the measured
    pose, not the last target, so a blocked arm never winds the spring up: the force a policy
    can press with is bounded by ``stiffness_pos * pos_scale * sqrt(3)`` and ``max_force``."""
    return np.asarray(pos, dtype=np.float64) + pos_scale * np.clip(action_xyz, -1.0, 1.0)
