"""Real Franka backend over pylibfranka (import-guarded: this file imports without it).

libfranka's control loop must answer every 1 ms, so it runs in its own thread, in one of two
modes (:class:`_PositionMode`, :class:`_TorqueMode`), one at a time:

- joint positions (the default): each cycle reads the state, moves an internal command one step
  of a :class:`~robot_drivers.motion.ReferenceShaper` (velocity and acceleration limited)
  towards the newest safety-filtered target (or at the commanded joint velocity) and writes
  ``JointPositions``. Callers only set targets; they never block the loop.
- torques (:meth:`LibfrankaArmBackend.start_torque_control`): each cycle calls a torque law
  (:mod:`robot_drivers.torque_control`; any callable, e.g. the Cartesian impedance law) and
  writes its torques, limited in size and rate, plus Coriolis. A joint command or
  :meth:`~LibfrankaArmBackend.hold` (the watchdog, the e-stop) ends it: position mode holds.
  :meth:`~LibfrankaArmBackend.command_impedance_target` runs the Cartesian impedance law of
  ``ee_impedance`` (:mod:`robot_drivers.impedance_law`) this way, moving its target per call.

An exception in the loop (a ``ControlException`` reflex, a ``NetworkException``, a torque law
error) ends it; the state reports REFLEX with the robot's error flags (else the exception) and
:meth:`~LibfrankaArmBackend.recover` runs ``automatic_error_recovery()`` -- over a fresh
connection when the old one was lost (libfranka's ``Robot`` is unusable after a network error)
-- and restarts the position loop.

End-effector frame: :meth:`~LibfrankaArmBackend.read_state` reports the grip site the
simulator's policies were trained on (:func:`robot_drivers.kinematics.grip_site_from_o_t_ee` of
``O_T_EE`` and ``F_T_EE``), not ``O_T_EE`` itself; impedance targets come in that frame and are
turned back into ``O_T_EE`` targets for the torque loop, which runs on libfranka's own frame.

pylibfranka's calls keep Python's GIL while they block (``readOnce`` up to one cycle, a gripper
move for the whole move), so other Python threads of the process slow the loop down and vice
versa: see docs/real_franka.md. So the gripper runs in a process of its own by default
(``gripper_process``, :mod:`robot_drivers.gripper_worker`): its commands return at once and its
state is the worker's latest; a dead worker is a ``gripper_lost`` error of the arm (motion is
refused until :meth:`~LibfrankaArmBackend.recover` restarts it). In the control process
(``gripper_process=False``) each command blocks the loop for its motion and the gripper's state
is read at most every ``gripper_poll_s`` (and after each gripper command).

The loop keeps libfranka's own timing: :attr:`~LibfrankaArmBackend.max_period_s` (the longest
robot time between two cycles, 1 ms when none was missed) and
:attr:`~LibfrankaArmBackend.missed_cycles` (robot cycles without a command from us).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.impedance import ImpedanceGains
from rlinf_contracts.rotations import matrix_to_quat_xyzw
from robot_drivers.arm import ArmBackend, DriverError
from robot_drivers.gripper_worker import GRIPPER_CALLS, GripperLost, GripperWorker
from robot_drivers.impedance_law import CartesianImpedanceLaw
from robot_drivers.kinematics import grip_site_from_o_t_ee, o_t_ee_from_grip_site
from robot_drivers.motion import ReferenceShaper
from robot_drivers.torque_control import TorqueInput, TorqueLaw, limit_torques
from robot_drivers.types import PANDA_DQ_MAX, ArmState, EEPose, GripperState, RobotMode

log = logging.getLogger(__name__)

# arm.realtime -> extra arguments of pylibfranka.Robot(ip, ...). "enforce" is libfranka's own
# default (it refuses a kernel without PREEMPT_RT); "ignore" is for simulators and bench tests.
REALTIME: dict[str, Callable[[Any], tuple[Any, ...]]] = {
    "enforce": lambda fr: (),
    "ignore": lambda fr: (fr.RealtimeConfig.kIgnore,),
}
# pylibfranka exception name on connect -> what to check (appended to the DriverError)
CONNECT_HINTS: dict[str, str] = {
    "RealtimeException": (
        " -- run the robot PC on a PREEMPT_RT kernel, or set arm.realtime: ignore (simulators, "
        "franky-sim; never a real robot)"
    ),
    "NetworkException": " -- check arm.ip, the cable, and that FCI is activated in Desk",
}


def import_pylibfranka() -> Any:
    try:
        return importlib.import_module("pylibfranka")
    except ImportError as e:
        raise DriverError(
            "backend 'libfranka' needs pylibfranka (pip install 'rlinf-ros[franka]'; its "
            "libfranka must match the robot's system version, see docs/real_franka.md); "
            "use backend 'sim' without a robot"
        ) from e


def column_major(m: Any) -> np.ndarray:
    """libfranka's column-major 16-vector (``O_T_EE``, ``F_T_EE``, ...) -> 4x4."""
    return np.asarray(m, dtype=np.float64).reshape(4, 4).T


def grip_site_pose(state: Any) -> EEPose:
    """The end-effector pose a policy sees -- the grip site -- from a ``RobotState``'s ``O_T_EE``
    and ``F_T_EE`` (:func:`robot_drivers.kinematics.grip_site_from_o_t_ee`)."""
    T = grip_site_from_o_t_ee(column_major(state.O_T_EE), column_major(state.F_T_EE))
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


class _PositionMode:
    """Joint position streaming through a :class:`ReferenceShaper` to the newest target."""

    name = "position"

    def __init__(self, arm: LibfrankaArmBackend) -> None:
        self.arm = arm
        self.shaper: ReferenceShaper | None = None

    def start(self) -> Any:
        return self.arm.robot.start_joint_position_control(
            self.arm._fr.ControllerMode.JointImpedance
        )

    def step(self, state: Any) -> Any:
        arm = self.arm
        if self.shaper is None:
            # velocity- and acceleration-limited, braking before the joint limits: no jump in
            # speed for the robot's own controller to reflex on
            q = np.asarray(state.q, dtype=np.float64)
            self.shaper = ReferenceShaper(q, speed_fraction=arm.max_speed_fraction)
        with arm._lock:
            velocity, target = arm._velocity, arm._target
        if velocity is not None:
            cmd = self.shaper.step(1e-3, velocity=velocity)
        else:
            cmd = self.shaper.step(
                1e-3, goal=target if target is not None else self.shaper.position
            )
        return arm._fr.JointPositions(cmd.tolist())


class _TorqueMode:
    """Torques of a law, limited by :func:`limit_torques`, plus Coriolis if asked."""

    name = "torque"

    def __init__(self, arm: LibfrankaArmBackend, law: TorqueLaw, compensate_coriolis: bool) -> None:
        self.arm, self.law, self.compensate_coriolis = arm, law, compensate_coriolis
        self.tau = np.zeros(7)  # the law's last torque after limiting: ramps up from zero

    def start(self) -> Any:
        if self.arm._model is None:
            self.arm._model = self.arm.robot.load_model()
        return self.arm.robot.start_torque_control()

    def step(self, state: Any) -> Any:
        model = self.arm._model
        inp = TorqueInput(
            q=np.asarray(state.q, dtype=np.float64),
            dq=np.asarray(state.dq, dtype=np.float64),
            o_t_ee=column_major(state.O_T_EE),
            jacobian=np.asarray(model.zero_jacobian(state), dtype=np.float64).reshape(7, 6).T,
            mass=np.asarray(model.mass(state), dtype=np.float64).reshape(7, 7).T,
            tau_prev=self.tau.copy(),
        )
        self.tau = limit_torques(self.law(inp), self.tau, dt=inp.dt)
        cmd = self.tau + np.asarray(model.coriolis(state)) if self.compensate_coriolis else self.tau
        return self.arm._fr.Torques(cmd.tolist())


class ThreadGripper:
    """The gripper called in the control process: each command blocks for its whole motion
    with the GIL held (the 1 kHz loop stalls meanwhile); the state is polled."""

    def __init__(self, arm: LibfrankaArmBackend) -> None:
        self.arm = arm
        self.gripper: Any = None
        self._state: GripperState | None = None
        self._read_at = 0.0

    def open(self) -> None:
        self.gripper = self.arm._fr.Gripper(self.arm.ip)

    def reading(self) -> tuple[GripperState, tuple[str, ...]]:
        # Gripper.read_once() blocks (GIL held) until the hand's next status: read at most every
        # gripper_poll_s, and after every command (the width only changes through them)
        now = time.monotonic()
        if self._state is None or now - self._read_at >= self.arm.gripper_poll_s:
            g = self.gripper.read_once()
            self._state = GripperState(float(g.width), float(g.max_width), bool(g.is_grasped))
            self._read_at = now
        return self._state, ()

    def command(self, kind: str, *args: float) -> bool:
        try:
            return bool(GRIPPER_CALLS[kind](self.gripper, args))
        finally:
            self._state = None

    def wait(self, timeout_s: float) -> bool:
        return True  # commands finish in the call

    def recover(self, reconnect: bool = False) -> None:
        if reconnect:
            self.gripper = None  # the old connection closes before the new one opens
            self.open()
        self._state = None

    def close(self) -> None:
        self.gripper = None


class ProcessGripper:
    """The gripper in a worker process (:class:`~robot_drivers.gripper_worker.GripperWorker`):
    commands return once sent; a dead worker is reported as a ``gripper_lost`` error."""

    def __init__(self, arm: LibfrankaArmBackend) -> None:
        self.arm = arm
        self.worker = self._worker()
        self.lost = ""

    def _worker(self) -> GripperWorker:
        a = self.arm
        return GripperWorker(a.ip, poll_s=a.gripper_poll_s, gripper_class=a.gripper_class)

    def open(self) -> None:
        self.worker.start()

    def _lose(self, e: GripperLost) -> None:
        if not self.lost:
            log.error("%s", e)
        self.lost = str(e)

    def reading(self) -> tuple[GripperState, tuple[str, ...]]:
        try:
            return self.worker.snapshot().state, ()
        except GripperLost as e:
            self._lose(e)
            return self.worker.last.state, (f"gripper_lost: {self.lost}",)

    def command(self, kind: str, *args: float) -> bool:
        try:
            self.worker.send(kind, *args)
            return True
        except GripperLost as e:
            self._lose(e)
            return False

    def wait(self, timeout_s: float) -> bool:
        try:
            return self.worker.wait(timeout_s=timeout_s)
        except GripperLost as e:
            self._lose(e)
            return False

    def recover(self, reconnect: bool = False) -> None:
        """A fresh worker in place of a dead one, or of a live one whose connection went
        through the same outage as the arm's (``reconnect``): its read would time out later,
        after the arm is back, and take the arm down again."""
        if reconnect or self.lost or not self.worker.alive:
            self.worker.close()
            self.worker = self._worker()
            self.worker.start()
            self.lost = ""

    def close(self) -> None:
        self.worker.close()


# arm.gripper_process -> where the gripper's blocking calls run
GRIPPER_LINKS: dict[bool, Callable[[LibfrankaArmBackend], ThreadGripper | ProcessGripper]] = {
    True: ProcessGripper,
    False: ThreadGripper,
}


class LibfrankaArmBackend(ArmBackend):
    """A Franka (FR3 / Panda) over pylibfranka with an in-thread 1 kHz control loop."""

    def __init__(
        self,
        ip: str,
        max_speed_fraction: float = 0.5,
        collision_torque: tuple[float, float] = (20.0, 40.0),
        collision_force: tuple[float, float] = (10.0, 20.0),
        joint_impedance: tuple[float, ...] = (3000, 3000, 3000, 2500, 2500, 2000, 2000),
        realtime: str = "enforce",
        gripper_poll_s: float = 0.1,
        gripper_process: bool = True,
        gripper_class: str = "pylibfranka:Gripper",
    ) -> None:
        if not ip:
            raise DriverError("backend 'libfranka' needs the robot's IP (arm.ip in the config)")
        if realtime not in REALTIME:
            raise ConfigError(
                f"arm.realtime={realtime!r}: use one of {sorted(REALTIME)} (enforce on the "
                "robot PC's PREEMPT_RT kernel, ignore for franky-sim)"
            )
        self.ip = ip
        self.realtime = realtime
        self.max_speed_fraction = max_speed_fraction
        self.step_max = np.asarray(PANDA_DQ_MAX) * max_speed_fraction * 1e-3  # rad per 1 ms cycle
        self.collision_torque = collision_torque
        self.collision_force = collision_force
        self.joint_impedance = joint_impedance
        # Gripper.read_once() blocks (GIL held) until the hand's next status: the worker (or, in
        # this process, a state read) reads it at most this often, and after every command
        self.gripper_poll_s = gripper_poll_s
        # a gripper motion holds the GIL for its length: in a process of its own it cannot
        # stall the 1 kHz loop (module doc); gripper_class is what that process opens
        self.gripper_process = gripper_process
        self.gripper_class = gripper_class
        self.gripper: ThreadGripper | ProcessGripper = GRIPPER_LINKS[gripper_process](self)
        self.robot: Any = None
        self._model: Any = None
        self._lock = threading.Lock()
        self._state: Any = None
        self._target: np.ndarray | None = None
        self._velocity: np.ndarray | None = None
        self._errors: tuple[str, ...] = ()
        self._connection_lost = False
        self._running = False
        self._mode: _PositionMode | _TorqueMode | None = None
        self._thread: threading.Thread | None = None
        self.cycles = 0  # control cycles run (all loops); a stalled loop stops counting
        self.max_period_s = 0.0  # the longest robot time between two cycles (libfranka's own)
        self.missed_cycles = 0  # robot cycles that passed without a command of ours

    # ---- connection ---------------------------------------------------------------------
    def connect(self) -> None:
        self._fr = import_pylibfranka()
        self._open()
        try:
            self.gripper.open()
        except DriverError:
            raise
        except Exception as e:
            raise DriverError(f"libfranka gripper at {self.ip}: {type(e).__name__}: {e}") from e
        self._start(_PositionMode(self))

    def _open(self) -> None:
        """(Re)connect the arm and set its collision thresholds and joint impedance."""
        fr = self._fr
        self.robot = self._model = None  # the old connection closes before the new one opens
        try:
            self.robot = fr.Robot(self.ip, *REALTIME[self.realtime](fr))
        except Exception as e:
            hint = CONNECT_HINTS.get(type(e).__name__, "")
            raise DriverError(f"libfranka arm at {self.ip}: {type(e).__name__}: {e}{hint}") from e
        lo_t, hi_t = self.collision_torque
        lo_f, hi_f = self.collision_force
        self.robot.set_collision_behavior([lo_t] * 7, [hi_t] * 7, [lo_f] * 6, [hi_f] * 6)
        self.robot.set_joint_impedance(list(self.joint_impedance))
        self._connection_lost = False
        with self._lock:
            self._state = self.robot.read_once()
            self._target = np.asarray(self._state.q, dtype=np.float64)
            self._velocity = None

    def disconnect(self) -> None:
        self._stop()
        try:
            self.robot.stop()
        except Exception as e:
            log.warning("robot.stop() failed on disconnect: %s", e)
        self.gripper.close()
        # a robot (and franky-sim) serves one client at a time: close ours now
        self.robot = self._model = None

    # ---- the control loop ---------------------------------------------------------------
    @property
    def robot_state(self) -> Any:
        """The newest libfranka ``RobotState`` (``q_d``: the joints last commanded, ...)."""
        with self._lock:
            return self._state

    @property
    def control_mode(self) -> str:
        """``position`` / ``torque`` while a loop runs, ``stopped`` otherwise."""
        mode = self._mode
        return mode.name if self._running and mode is not None else "stopped"

    def _start(self, mode: _PositionMode | _TorqueMode) -> None:
        with self._lock:
            self._errors = ()
        self._mode, self._running = mode, True
        self._thread = threading.Thread(
            target=self._loop, args=(mode,), name=f"libfranka-{self.ip}", daemon=True
        )
        self._thread.start()

    def _stop(self) -> None:
        """End the loop; a healthy one finishes its motion (``motion_finished``) first."""
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=2.0)  # readOnce gives up after 1 s without the robot

    def _run(self, mode: _PositionMode | _TorqueMode) -> None:
        ctrl = mode.start()
        first = True  # the first period counts from before the loop: not a cycle of it
        try:
            while True:
                state, period = ctrl.readOnce()
                with self._lock:
                    self._state = state
                if not first:
                    self._time(period.to_sec())
                first = False
                cmd = mode.step(state)
                if not self._running:
                    cmd.motion_finished = True
                    ctrl.writeOnce(cmd)
                    return
                ctrl.writeOnce(cmd)
                self.cycles += 1
        finally:
            ctrl = None  # release the control lock before anyone reads the robot again

    def _time(self, period_s: float) -> None:
        self.max_period_s = max(self.max_period_s, period_s)
        self.missed_cycles += max(round(period_s * 1e3) - 1, 0)

    def reset_timing(self) -> None:
        """Start :attr:`max_period_s` and :attr:`missed_cycles` afresh."""
        self.max_period_s, self.missed_cycles = 0.0, 0

    def _loop(self, mode: _PositionMode | _TorqueMode) -> None:
        failure = ""
        try:
            self._run(mode)
        except Exception as e:  # ControlException (reflex), NetworkException, a law's error
            failure = f"{type(e).__name__}: {e}"
            self._connection_lost = type(e).__name__ == "NetworkException"
        if failure:
            errors = () if self._connection_lost else self._robot_errors()
            with self._lock:
                self._errors = errors or (failure,)
            log.error("libfranka %s loop stopped: %s (errors %s)", mode.name, failure, errors)
        self._running = False

    def _robot_errors(self) -> tuple[str, ...]:
        try:
            return error_names(getattr(self.robot.read_once(), "current_errors", None))
        except Exception as e:
            log.warning("could not read the robot's errors: %s", e)
            return ()

    def _position(self) -> None:
        """Back to position mode, holding still, if a torque loop runs."""
        if isinstance(self._mode, _TorqueMode) and self._running:
            self._stop()
            self.hold_here()
            self._start(_PositionMode(self))

    def hold_here(self) -> None:
        with self._lock:
            self._velocity = None
            self._target = np.asarray(self._state.q, dtype=np.float64).copy()

    # ---- torque streaming ---------------------------------------------------------------
    def start_torque_control(self, law: TorqueLaw, compensate_coriolis: bool = True) -> None:
        """Stream ``law``'s torques at 1 kHz instead of joint positions (see module doc)."""
        if self._errors:
            raise DriverError(f"robot has errors {list(self._errors)}: call recover() first")
        self._stop()
        self._start(_TorqueMode(self, law, compensate_coriolis))

    def command_impedance_target(
        self, pose: np.ndarray, gains: ImpedanceGains, home: np.ndarray
    ) -> None:
        """Track ``pose`` (4x4, base frame) with the Cartesian impedance law in the torque loop:
        the first call (or one with other gains) starts it, later calls move its target."""
        mode = self._mode
        law = mode.law if isinstance(mode, _TorqueMode) and self._running else None
        # ``pose`` is a grip-site pose (the frame read_state reports); the law tracks O_T_EE
        with self._lock:
            f_t_ee = column_major(self._state.F_T_EE)
        pose = o_t_ee_from_grip_site(pose, f_t_ee)
        if isinstance(law, CartesianImpedanceLaw) and law.gains == gains:
            law.set_target(pose)
            return
        self.start_torque_control(CartesianImpedanceLaw(gains, home, pose))

    def stop_torque_control(self) -> None:
        """Back to the joint position loop, holding where the arm is."""
        self._position()

    # ---- ArmBackend ---------------------------------------------------------------------
    def read_state(self) -> ArmState:
        with self._lock:
            s, errors = self._state, self._errors
        gripper, gripper_errors = self.gripper.reading()
        errors += gripper_errors
        mode = RobotMode(int(getattr(s.robot_mode, "value", s.robot_mode)))
        if errors and mode != RobotMode.USER_STOPPED:
            mode = RobotMode.REFLEX
        return ArmState(
            q=np.asarray(s.q, dtype=np.float64),
            dq=np.asarray(s.dq, dtype=np.float64),
            tau_j=np.asarray(s.tau_J, dtype=np.float64),
            ee_pose=grip_site_pose(s),
            gripper=gripper,
            mode=mode,
            errors=errors,
            stamp=time.monotonic(),
        )

    def command_joint_positions(self, q: np.ndarray) -> None:
        self._position()
        with self._lock:
            self._target, self._velocity = np.asarray(q, dtype=np.float64).copy(), None

    def command_joint_velocities(self, dq: np.ndarray) -> None:
        self._position()
        with self._lock:
            self._velocity = np.asarray(dq, dtype=np.float64).copy()

    def hold(self) -> None:
        self._position()
        self.hold_here()

    def gripper_move(self, width: float, speed: float) -> bool:
        return self.gripper.command("move", width, speed)

    def gripper_grasp(
        self, width: float, speed: float, force: float, epsilon_inner: float, epsilon_outer: float
    ) -> bool:
        return self.gripper.command("grasp", width, speed, force, epsilon_inner, epsilon_outer)

    def gripper_homing(self) -> bool:
        return self.gripper.command("homing")

    def gripper_stop(self) -> bool:
        return self.gripper.command("stop")

    def gripper_wait(self, timeout_s: float = 5.0) -> bool:
        """Wait for the last gripper command (in a worker process: at most ``timeout_s``);
        True when it succeeded."""
        return self.gripper.wait(timeout_s)

    def recover(self) -> bool:
        self._stop()
        try:
            reconnected = self._recover_robot()
        except Exception as e:
            log.error("automatic_error_recovery failed: %s", e)
            return False
        self._start(_PositionMode(self))
        try:
            self.gripper.recover(reconnect=reconnected)
        except DriverError as e:
            log.error("gripper not recovered: %s", e)
            return False
        return True

    def _recover_robot(self) -> bool:
        """``automatic_error_recovery()``; over a new connection if the old one is lost.
        True when the arm had to reconnect (the robot went silent: the gripper's connection
        is suspect too)."""
        reconnected = self._connection_lost
        if reconnected:
            self._open()
        try:
            self.robot.automatic_error_recovery()
        except Exception as e:
            if type(e).__name__ != "NetworkException":
                raise
            log.warning("connection to %s lost (%s): reconnecting", self.ip, e)
            self._open()
            self.robot.automatic_error_recovery()
            reconnected = True
        with self._lock:
            self._state = self.robot.read_once()
            self._target, self._velocity = np.asarray(self._state.q, dtype=np.float64), None
        return reconnected
