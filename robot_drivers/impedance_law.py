"""Cartesian impedance as a torque law: the robot side of ``ee_impedance`` control.

Why a module of its own: a policy trained with ``ee_impedance`` in simulation moves an
end-effector *target pose* that a torque loop tracks with
:func:`rlinf_contracts.impedance.impedance_torques` and the spec's gains. On the robot the same
law runs inside the backend's own loop (libfranka's 1 kHz torque thread, the MuJoCo arm's
physics steps), fed by that loop's measurements; this module is that law as a
:data:`~robot_drivers.torque_control.TorqueLaw`, with a target the robot node may replace at any
time from another thread. Torque size / rate clamps, the watchdog and the e-stop stay where
they are for any law (:func:`~robot_drivers.torque_control.limit_torques`, :class:`FrankaArm`).

>>> law = CartesianImpedanceLaw(ImpedanceGains(), np.zeros(7), np.eye(4))
>>> inp = TorqueInput(q=np.zeros(7), dq=np.zeros(7), o_t_ee=np.eye(4),
...                   jacobian=np.eye(6, 7), mass=np.eye(7), tau_prev=np.zeros(7))
>>> law(inp).round(6).tolist()   # at the target, at home, at rest: no torque
[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

import numpy as np

from rlinf_contracts.impedance import ImpedanceGains, impedance_torques
from robot_drivers.torque_control import TorqueInput


@runtime_checkable
class ImpedanceTracking(Protocol):
    """A backend that can track an end-effector target pose with the Cartesian impedance law.

    ``pose``: 4x4 target in the robot base frame; ``gains`` the spec's; ``home`` the joint
    posture of the null-space pull. The first call starts the torque loop, later ones move its
    target; any joint command or ``hold()`` hands back to position control, holding still."""

    def command_impedance_target(
        self, pose: np.ndarray, gains: ImpedanceGains, home: np.ndarray
    ) -> None: ...


class CartesianImpedanceLaw:
    """``impedance_torques`` toward the newest target pose (thread-safe :meth:`set_target`)."""

    def __init__(self, gains: ImpedanceGains, home: np.ndarray, target: np.ndarray) -> None:
        self.gains = gains
        self.home = np.asarray(home, dtype=np.float64).copy()
        self._lock = threading.Lock()
        self._target = _checked(target)

    @property
    def target(self) -> np.ndarray:
        with self._lock:
            return self._target.copy()

    def set_target(self, pose: np.ndarray) -> None:
        pose = _checked(pose)
        with self._lock:
            self._target = pose

    def __call__(self, inp: TorqueInput) -> np.ndarray:
        with self._lock:
            target = self._target
        return impedance_torques(
            self.gains,
            inp.q,
            inp.dq,
            inp.o_t_ee[:3, 3],
            inp.o_t_ee[:3, :3],
            inp.jacobian,
            target[:3, 3],
            target[:3, :3],
            self.home,
            mass=inp.mass,
            tau_prev=inp.tau_prev,
            dt=inp.dt,
        )


def _checked(pose: np.ndarray) -> np.ndarray:
    out = np.asarray(pose, dtype=np.float64)
    if out.shape != (4, 4) or not np.all(np.isfinite(out)):
        raise ValueError(f"impedance target must be a finite 4x4 pose, got {out.tolist()!r}")
    return out.copy()
