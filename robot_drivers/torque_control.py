"""Torque streaming for a 1 kHz robot loop: what a torque law sees, returns, and what is sent.

Why a module of its own: the libfranka backend streams whatever law it is given (a joint PD
here, the Cartesian impedance law of :mod:`rlinf_contracts.impedance` on the robot), so the law
is a plain callable ``TorqueLaw(TorqueInput) -> tau [7]`` and knows nothing of pylibfranka.
Everything a law may need per cycle is in :class:`TorqueInput` (measured joints, end-effector
pose, zero Jacobian, mass matrix, the previous command), computed once by the backend.

What a law returns is *not* sent as is: :func:`limit_torques` clamps it into the joint torque
box and moves at most ``FRANKA_TAU_RATE_MAX * dt`` from the previous command (the robot reflexes
on a torque discontinuity), and a non-finite or mis-shaped result is an error that ends the
loop (:class:`TorqueLawError`). Gravity is never part of a law's output: Franka's firmware adds
it; the backend adds Coriolis when asked (``compensate_coriolis``).

>>> law = JointPDLaw(goal=np.zeros(7), stiffness=10.0)
>>> inp = TorqueInput(q=np.full(7, 0.1), dq=np.zeros(7), o_t_ee=np.eye(4),
...                   jacobian=np.zeros((6, 7)), mass=np.eye(7), tau_prev=np.zeros(7))
>>> law(inp)[:2].round(3).tolist()
[-1.0, -1.0]
>>> limit_torques(np.full(7, 500.0), np.zeros(7), dt=1e-3).tolist()   # 1 Nm per 1 ms cycle
[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlinf_contracts.impedance import FRANKA_TAU_MAX, FRANKA_TAU_RATE_MAX


class TorqueLawError(RuntimeError):
    """A torque law returned something no robot may be sent (NaN, wrong shape)."""


@dataclass(frozen=True)
class TorqueInput:
    """One cycle's measurements, in the robot base frame, SI units.

    ``o_t_ee`` is the 4x4 end-effector pose, ``jacobian`` the 6x7 zero Jacobian (translation
    rows first), ``mass`` the 7x7 joint-space mass matrix, ``tau_prev`` the torque last sent
    by the law (after :func:`limit_torques`, without Coriolis), ``dt`` the cycle period.
    """

    q: np.ndarray
    dq: np.ndarray
    o_t_ee: np.ndarray
    jacobian: np.ndarray
    mass: np.ndarray
    tau_prev: np.ndarray
    dt: float = 1e-3


TorqueLaw = Callable[[TorqueInput], np.ndarray]


@dataclass(frozen=True)
class JointPDLaw:
    """``tau = K (goal - q) - D dq`` per joint; ``damping=None`` is ``2 sqrt(K)``."""

    goal: np.ndarray
    stiffness: float | tuple[float, ...] = 100.0  # Nm/rad
    damping: float | tuple[float, ...] | None = None  # Nms/rad

    def __call__(self, inp: TorqueInput) -> np.ndarray:
        k = np.asarray(self.stiffness, dtype=np.float64)
        d = 2.0 * np.sqrt(k) if self.damping is None else np.asarray(self.damping, np.float64)
        return k * (np.asarray(self.goal, dtype=np.float64) - inp.q) - d * inp.dq


def limit_torques(
    tau: np.ndarray,
    tau_prev: np.ndarray,
    dt: float = 1e-3,
    tau_max: tuple[float, ...] = FRANKA_TAU_MAX,
    rate_max: float = FRANKA_TAU_RATE_MAX,
) -> np.ndarray:
    """``tau`` checked (7 finite values, else :class:`TorqueLawError`), clamped into
    ``[-tau_max, tau_max]`` and to at most ``rate_max * dt`` away from ``tau_prev``."""
    out = np.asarray(tau, dtype=np.float64)
    if out.shape != (len(tau_max),) or not np.all(np.isfinite(out)):
        raise TorqueLawError(
            f"torque law returned {out.tolist()!r}: need {len(tau_max)} finite torques (Nm)"
        )
    limits = np.asarray(tau_max, dtype=np.float64)
    out = np.clip(out, -limits, limits)
    step = rate_max * dt
    return tau_prev + np.clip(out - tau_prev, -step, step)
