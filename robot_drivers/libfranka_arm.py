"""Real Franka backend over pylibfranka (import-guarded: this file imports without it).

libfranka's control loop must answer every 1 ms, so it runs in its own thread: each cycle it
reads the state, moves an internal command one step of a
:class:`~robot_drivers.motion.ReferenceShaper` (velocity and acceleration limited) towards the
newest safety-filtered target (or at the commanded joint velocity) and writes ``JointPositions``.
Callers only set targets; they never block the loop. A ``ControlException`` (a reflex) ends
the loop, the state reports REFLEX with the error, and :meth:`recover` runs
``automatic_error_recovery()`` and restarts the loop.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from typing import Any

import numpy as np

from rlinf_contracts.rotations import matrix_to_quat_xyzw
from robot_drivers.arm import ArmBackend, DriverError
from robot_drivers.motion import ReferenceShaper
from robot_drivers.types import PANDA_DQ_MAX, ArmState, EEPose, GripperState, RobotMode

log = logging.getLogger(__name__)


def import_pylibfranka() -> Any:
    try:
        return importlib.import_module("pylibfranka")
    except ImportError as e:
        raise DriverError(
            "backend 'libfranka' needs pylibfranka (built against your robot's libfranka version; "
            "see https://github.com/frankarobotics/libfranka); use backend 'sim' without a robot"
        ) from e


def o_t_ee_to_pose(o_t_ee: Any) -> EEPose:
    """libfranka's column-major 16-vector ``O_T_EE`` -> :class:`EEPose`."""
    T = np.asarray(o_t_ee, dtype=np.float64).reshape(4, 4).T
    return EEPose(T[:3, 3].copy(), matrix_to_quat_xyzw(T[:3, :3]))


def error_names(errors: Any) -> tuple[str, ...]:
    """Names of the active flags of a libfranka ``Errors`` object (bool attributes)."""
    if errors is None:
        return ()
    if isinstance(errors, (list, tuple)):
        return tuple(str(e) for e in errors)
    return tuple(
        sorted(n for n in dir(errors) if not n.startswith("_") and getattr(errors, n) is True)
    )


class LibfrankaArmBackend(ArmBackend):
    """A Franka (FR3 / Panda) over pylibfranka with an in-thread 1 kHz joint position loop."""

    def __init__(
        self,
        ip: str,
        max_speed_fraction: float = 0.5,
        collision_torque: tuple[float, float] = (20.0, 40.0),
        collision_force: tuple[float, float] = (10.0, 20.0),
        joint_impedance: tuple[float, ...] = (3000, 3000, 3000, 2500, 2500, 2000, 2000),
    ) -> None:
        if not ip:
            raise DriverError("backend 'libfranka' needs the robot's IP (arm.ip in the config)")
        self.ip = ip
        self.max_speed_fraction = max_speed_fraction
        self.step_max = np.asarray(PANDA_DQ_MAX) * max_speed_fraction * 1e-3  # rad per 1 ms cycle
        self.collision_torque = collision_torque
        self.collision_force = collision_force
        self.joint_impedance = joint_impedance
        self._lock = threading.Lock()
        self._state: Any = None
        self._target: np.ndarray | None = None
        self._velocity: np.ndarray | None = None
        self._errors: tuple[str, ...] = ()
        self._running = False
        self._thread: threading.Thread | None = None

    def connect(self) -> None:
        fr = self._fr = import_pylibfranka()
        self.robot = fr.Robot(self.ip)
        self.gripper = fr.Gripper(self.ip)
        lo_t, hi_t = self.collision_torque
        lo_f, hi_f = self.collision_force
        self.robot.set_collision_behavior([lo_t] * 7, [hi_t] * 7, [lo_f] * 6, [hi_f] * 6)
        self.robot.set_joint_impedance(list(self.joint_impedance))
        self._state = self.robot.read_once()
        self._target = np.asarray(self._state.q, dtype=np.float64)
        self._start_loop()

    def _start_loop(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._loop, name=f"libfranka-{self.ip}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        fr = self._fr
        try:
            ctrl = self.robot.start_joint_position_control(fr.ControllerMode.JointImpedance)
            state, _ = ctrl.readOnce()
            cmd = np.asarray(state.q, dtype=np.float64)
            # velocity- and acceleration-limited, braking before the joint limits: no jump in
            # speed for the robot's own controller to reflex on
            shaper = ReferenceShaper(cmd, speed_fraction=self.max_speed_fraction)
            while self._running:
                state, duration = ctrl.readOnce()
                with self._lock:
                    self._state = state
                    velocity = self._velocity
                    target = self._target if self._target is not None else cmd
                if velocity is not None:
                    cmd = shaper.step(1e-3, velocity=velocity)
                else:
                    cmd = shaper.step(1e-3, goal=target)
                ctrl.writeOnce(fr.JointPositions(cmd.tolist()))
        except Exception as e:  # ControlException / NetworkException: the robot stopped itself
            with self._lock:
                self._errors = error_names(
                    getattr(self.robot.read_once(), "current_errors", None)
                ) or (f"{type(e).__name__}: {e}",)
            log.error("libfranka control loop stopped: %s", e)
        finally:
            self._running = False

    def disconnect(self) -> None:
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        try:
            self.robot.stop()
        except Exception as e:
            log.warning("robot.stop() failed on disconnect: %s", e)

    def read_state(self) -> ArmState:
        with self._lock:
            s, errors = self._state, self._errors
        mode = RobotMode(int(getattr(s.robot_mode, "value", s.robot_mode)))
        if errors and mode != RobotMode.USER_STOPPED:
            mode = RobotMode.REFLEX
        g = self.gripper.read_once()
        return ArmState(
            q=np.asarray(s.q, dtype=np.float64),
            dq=np.asarray(s.dq, dtype=np.float64),
            tau_j=np.asarray(s.tau_J, dtype=np.float64),
            ee_pose=o_t_ee_to_pose(s.O_T_EE),
            gripper=GripperState(float(g.width), float(g.max_width), bool(g.is_grasped)),
            mode=mode,
            errors=errors,
            stamp=time.monotonic(),
        )

    def command_joint_positions(self, q: np.ndarray) -> None:
        with self._lock:
            self._target, self._velocity = np.asarray(q, dtype=np.float64).copy(), None

    def command_joint_velocities(self, dq: np.ndarray) -> None:
        with self._lock:
            self._velocity = np.asarray(dq, dtype=np.float64).copy()

    def hold(self) -> None:
        with self._lock:
            self._velocity = None
            self._target = np.asarray(self._state.q, dtype=np.float64).copy()

    def gripper_move(self, width: float, speed: float) -> bool:
        return bool(self.gripper.move(width, speed))

    def gripper_grasp(
        self, width: float, speed: float, force: float, epsilon_inner: float, epsilon_outer: float
    ) -> bool:
        return bool(self.gripper.grasp(width, speed, force, epsilon_inner, epsilon_outer))

    def gripper_homing(self) -> bool:
        return bool(self.gripper.homing())

    def gripper_stop(self) -> bool:
        return bool(self.gripper.stop())

    def recover(self) -> bool:
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        try:
            self.robot.automatic_error_recovery()
        except Exception as e:
            log.error("automatic_error_recovery failed: %s", e)
            return False
        with self._lock:
            self._errors = ()
            self._state = self.robot.read_once()
            self._target, self._velocity = np.asarray(self._state.q, dtype=np.float64), None
        self._start_loop()
        return True
