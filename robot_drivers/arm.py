"""Arm driver: :class:`ArmBackend` (what a robot or simulator must do) and :class:`FrankaArm`.

Why two layers: backends (pylibfranka, MuJoCo) only move joints and report state; everything
policy-related -- safety limits, the staleness watchdog, the e-stop latch, end-effector delta
commands through IK -- lives once in :class:`FrankaArm`, so no backend can skip it.

Call :meth:`FrankaArm.tick` at the driver rate (the ROS robot node does it from a timer): it
runs the watchdog and lets a simulated backend advance its physics to wall-clock time.
"""

from __future__ import annotations

import abc
import logging
import time
from collections.abc import Callable

import numpy as np

from rlinf_contracts.impedance import ImpedanceGains
from robot_drivers.impedance_law import ImpedanceTracking
from robot_drivers.kinematics import apply_ee_delta, forward_kinematics
from robot_drivers.safety import LIMIT_ESTOP, SafetyConfig, SafetyLayer
from robot_drivers.types import ArmState, CommandOutcome, GripperState

log = logging.getLogger(__name__)


class DriverError(RuntimeError):
    """A backend failed (connection, control exception); the message says what to check."""


class ArmBackend(abc.ABC):
    """One physical or simulated arm + gripper. Methods are called from one thread."""

    dof: int = 7

    def connect(self) -> None:  # noqa: B027 -- optional hook: a no-op unless a backend needs it
        """Open the connection / build the simulator."""

    def disconnect(self) -> None:  # noqa: B027 -- optional hook, as connect
        """Stop motion and release the connection."""

    @abc.abstractmethod
    def read_state(self) -> ArmState:
        """The newest state."""

    @abc.abstractmethod
    def command_joint_positions(self, q: np.ndarray) -> None:
        """Servo to joint target ``q`` (already safety-filtered)."""

    @abc.abstractmethod
    def command_joint_velocities(self, dq: np.ndarray) -> None:
        """Run at joint velocity ``dq`` (already safety-filtered) until the next command."""

    @abc.abstractmethod
    def hold(self) -> None:
        """Hold the current position (watchdog, e-stop)."""

    @abc.abstractmethod
    def gripper_move(self, width: float, speed: float) -> bool: ...

    @abc.abstractmethod
    def gripper_grasp(
        self, width: float, speed: float, force: float, epsilon_inner: float, epsilon_outer: float
    ) -> bool: ...

    @abc.abstractmethod
    def gripper_homing(self) -> bool: ...

    def gripper_stop(self) -> bool:
        return True

    def gripper_wait(self, timeout_s: float = 5.0) -> bool:
        """Wait (at most ``timeout_s``) for the last gripper command; True when it succeeded.
        A backend whose gripper commands return before the motion ends (libfranka's gripper
        process) waits here; the others finished in the call."""
        return True

    @abc.abstractmethod
    def recover(self) -> bool:
        """Clear robot errors (reflexes) so commands are accepted again."""

    def advance(self, now: float) -> None:  # noqa: B027 -- hardware does nothing (see below)
        """Simulators step their physics to ``now``; hardware does nothing."""


class FrankaArm:
    """A Franka arm (or its sim twin) with safety in the command path.

    >>> from robot_drivers.sim_arm import KinematicArmBackend
    >>> arm = FrankaArm(KinematicArmBackend())
    >>> arm.connect()
    >>> out = arm.move_joints(arm.state().q + 5.0)      # far beyond limits and max step
    >>> sorted(out.events)
    ['position_limit', 'velocity_limit']
    >>> arm.estop("test"); arm.move_joints(arm.state().q).refused
    True
    """

    def __init__(
        self,
        backend: ArmBackend,
        safety: SafetyConfig | None = None,
        name: str = "arm",
        joint_prefix: str = "panda_",
        clock: Callable[[], float] = time.monotonic,
        command_period_s: float = 0.1,
        impedance: ImpedanceGains | None = None,
        home: np.ndarray | None = None,
        gripper_deadband: float = 1e-3,
    ) -> None:
        self.backend = backend
        # a streamed gripper width closer than this (m) to the last one sent is not sent: a
        # hardware gripper move blocks for the whole motion (see the robot node's gripper path)
        self.gripper_deadband = gripper_deadband
        # ee_impedance (None: position control only): the gains target poses are tracked with,
        # and the posture of the law's null-space pull
        self.impedance = impedance
        self.home = None if home is None else np.asarray(home, dtype=np.float64)
        self.name = name
        self.joint_prefix = joint_prefix
        self._clock = clock
        # a backend may declare its own kinematics (a bridged UR has none of the Panda's): its
        # ``fk`` (None: no workspace box) replaces the Panda forward kinematics of the safety layer
        self.safety = SafetyLayer(
            safety, name=name, clock=clock, fk=getattr(backend, "fk", forward_kinematics)
        )
        self.command_period_s = command_period_s
        self._holding = False
        self.last_refusal = ""  # why the last refused command (motion or gripper) was refused

    # ---- lifecycle ----------------------------------------------------------------------
    @property
    def joint_names(self) -> list[str]:
        """franka_ros2 naming: ``<prefix>joint1..7`` (``panda_`` or ``fr3_``,
        ``left_panda_``...)."""
        return [f"{self.joint_prefix}joint{i + 1}" for i in range(self.backend.dof)]

    @property
    def gripper_joint_names(self) -> list[str]:
        return [f"{self.joint_prefix}finger_joint1", f"{self.joint_prefix}finger_joint2"]

    def connect(self) -> None:
        self.backend.connect()
        log.info("[%s] connected (%s)", self.name, type(self.backend).__name__)

    def disconnect(self) -> None:
        self.backend.disconnect()

    def __enter__(self) -> FrankaArm:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    @property
    def counters(self) -> dict[str, int]:
        """Safety events so far (``position_limit``, ``max_step``, ``stale_hold``...)."""
        return dict(self.safety.counters)

    def state(self) -> ArmState:
        return self.backend.read_state()

    def now(self) -> float:
        """This arm's clock (``issued_at`` stamps are in it)."""
        return self._clock()

    # ---- motion -------------------------------------------------------------------------
    def _dt(self) -> float:
        """Time the commanded step may take: the time that really passed since the previous
        command (at most 2 periods; the period for the first one).

        Why not "at least one period": two ticks bunched together (one late, the next on
        schedule) would each move a full period's worth, so the arm briefly ran at twice the
        speed limit (0.84 x dq_max measured with velocity_scale 0.5). Callers that sample a
        trajectory at wall time (the robot node) ask for exactly the elapsed share of the move,
        so the real elapsed time clamps nothing they did not overdo.
        """
        period = max(self.command_period_s, 1e-3)
        last = self.safety.last_command_time
        if last is None:
            return period
        return float(np.clip(self._clock() - last, 1e-3, 2 * period))

    def _check_limits(self, st: ArmState) -> None:
        """E-stop when the measured joints are past the limits (faster than ``dq_max``, beyond a
        position limit): whatever got the arm there (a servo overshoot, a bridged controller),
        it stops until an operator resets the latch."""
        if self.safety.estopped:
            return
        reason = self.safety.check_measured(st.q, st.dq)
        if reason is not None:
            self.safety.record("limit_violation", reason)
            self.estop(f"{LIMIT_ESTOP}: {reason}")

    def _check_error(self, st: ArmState) -> CommandOutcome | None:
        self._check_limits(st)
        if st.has_error:
            why = (
                f"refused: robot in {st.mode.name} with errors {list(st.errors)}; call "
                "error_recovery first"
            )
            self.safety.record("error_refused", why)
            return CommandOutcome(
                target=st.q.copy(), events=("error_refused",), refused=True, reason=why
            )
        return None

    def _done(self, out: CommandOutcome) -> CommandOutcome:
        if out.refused:
            self.last_refusal = out.reason
        return out

    def move_joints(self, q_target: np.ndarray, issued_at: float | None = None) -> CommandOutcome:
        """Joint position command (rad), clamped by the safety layer; returns what was sent.

        ``issued_at`` (this arm's clock): when the command's source was issued, e.g. the arrival
        of the trajectory message being sampled; the watchdog refuses it ``watchdog_ms`` later.
        """
        st = self.state()
        refused = self._check_error(st)
        if refused is not None:
            return self._done(refused)
        out = self.safety.filter_joint_positions(q_target, st.q, self._dt(), issued_at=issued_at)
        if not out.refused:
            self.backend.command_joint_positions(out.target)
            self._holding = False
        return self._done(out)

    def move_velocities(self, dq: np.ndarray) -> CommandOutcome:
        """Joint velocity command (rad/s); held until the next command or the watchdog fires."""
        st = self.state()
        refused = self._check_error(st)
        if refused is not None:
            return self._done(refused)
        out = self.safety.filter_joint_velocities(dq, st.q, self.command_period_s)
        if not out.refused:
            self.backend.command_joint_velocities(out.target)
            self._holding = False
        return self._done(out)

    def move_ee_delta(self, delta: np.ndarray) -> CommandOutcome:
        """End-effector delta ``[dx, dy, dz, rx, ry, rz]`` (m, rotation vector rad; base frame)."""
        delta = np.asarray(delta, dtype=np.float64)
        if delta.shape != (6,):
            raise ValueError(f"ee delta must have shape (6,), got {delta.shape}")
        st = self.state()
        return self.move_joints(apply_ee_delta(st.q, delta))

    def track_pose(self, pose: np.ndarray, issued_at: float | None = None) -> CommandOutcome:
        """``ee_impedance``: impedance target ``pose`` (4x4, base frame) for the backend's torque
        loop, after the safety layer (e-stop, staleness, workspace box); the watchdog and the
        e-stop end the loop with :meth:`ArmBackend.hold` like any motion."""
        backend = self.backend
        if self.impedance is None or not isinstance(backend, ImpedanceTracking):
            raise DriverError(
                f"arm {self.name!r}: target poses need control ee_impedance on a backend with a "
                f"torque loop (libfranka, sim); {type(backend).__name__} has "
                f"{'none' if not isinstance(backend, ImpedanceTracking) else 'no gains set'}"
            )
        st = self.state()
        refused = self._check_error(st)
        if refused is not None:
            return self._done(refused)
        out = self.safety.filter_pose_target(pose, st.q, issued_at=issued_at)
        if not out.refused:
            home = self.home if self.home is not None else st.q
            backend.command_impedance_target(out.target, self.impedance, home)
            self._holding = False
        return self._done(out)

    # ---- gripper ------------------------------------------------------------------------
    def _gripper_refused(self, action: str, *values: float) -> bool:
        """Refuse a gripper command while e-stopped or with a non-finite value; the reason goes
        to :attr:`last_refusal` (the robot node answers it to the service caller)."""
        if self.safety.estopped:
            why = f"{action} {self.safety.estop_refusal()}"
            self.safety.record("estop_refused", why)
        elif not all(np.isfinite(v) for v in values):
            why = f"{action} refused: non-finite value in {list(values)}"
            self.safety.record("non_finite", why)
        else:
            return False
        self.last_refusal = why
        return True

    def gripper_move(self, width: float, speed: float = 0.1) -> bool:
        if self._gripper_refused("gripper move", width, speed):
            return False
        return self.backend.gripper_move(self.safety.filter_gripper_width(width), speed)

    def gripper_grasp(
        self,
        width: float = 0.0,
        speed: float = 0.1,
        force: float = 20.0,
        epsilon_inner: float = 0.005,
        epsilon_outer: float = 0.005,
    ) -> bool:
        if self._gripper_refused("grasp", width, speed, force, epsilon_inner, epsilon_outer):
            return False
        return self.backend.gripper_grasp(
            self.safety.filter_gripper_width(width), speed, force, epsilon_inner, epsilon_outer
        )

    def gripper_homing(self) -> bool:
        if self._gripper_refused("homing"):
            return False
        return self.backend.gripper_homing()

    def gripper_state(self) -> GripperState:
        return self.state().gripper

    def gripper_wait(self, timeout_s: float = 5.0) -> bool:
        """Wait for the last gripper command to finish (a reset that homes the hand)."""
        return self.backend.gripper_wait(timeout_s)

    # ---- e-stop, recovery, watchdog -----------------------------------------------------
    def estop(self, reason: str = "requested") -> None:
        """Latch the e-stop and hold position now."""
        self.safety.estop(reason)
        self.safety.forget_target()
        self.backend.hold()
        self.backend.gripper_stop()
        self._holding = True

    def reset_estop(self) -> bool:
        return self.safety.reset_estop()

    def release_limit_estop(self) -> str | None:
        """Release the latch when a measured limit violation set it (never an operator's e-stop);
        returns the reason released, or None.

        Why: a scene twin's episode reset puts the arm back at the episode's start pose, as the
        simulator it twins does (where nothing latches). During online RL an early policy can
        press a joint a few mrad past its stop; the latch then refused every command for the
        rest of the run, since nobody stands at a twin to call ``reset_estop``. Only the scene
        reset calls this; on a real arm the latch waits for a person."""
        reason = self.safety.estop_reason
        if reason is None or not reason.startswith(LIMIT_ESTOP):
            return None
        self.safety.reset_estop()
        return reason

    def recover(self) -> bool:
        """Automatic error recovery on the robot (does not release a latched e-stop)."""
        ok = self.backend.recover()
        self.safety.forget_target()
        log.info("[%s] error recovery %s", self.name, "succeeded" if ok else "FAILED")
        if not ok:
            self.safety.record("recovery_failed", "automatic error recovery failed")
        return ok

    def tick(self, now: float | None = None) -> None:
        """Driver-rate housekeeping: watchdog hold on stale commands, sim physics to ``now``."""
        now = self._clock() if now is None else now
        self.backend.advance(now)  # the last command was valid until now; then check staleness
        self._check_limits(self.state())
        if not self._holding and self.safety.is_stale(now):
            age = (now - (self.safety.last_issued_time or now)) * 1000
            self.safety.record(
                "stale_hold",
                f"no command for {age:.0f} ms "
                f"> {self.safety.cfg.watchdog_ms:.0f} ms; holding position",
            )
            self.backend.hold()
            self.safety.forget_target()
            self._holding = True

    def settle(self) -> None:
        """The last target was reached on purpose (trajectory done): nothing stale to stop."""
        self._holding = True

    @property
    def holding(self) -> bool:
        return self._holding
