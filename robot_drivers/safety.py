"""Safety at the lowest level: every arm command passes through :class:`SafetyLayer` first.

Why in the driver and not in a ROS node: a policy, a teleop device, a test script and the ROS
robot node all end in :class:`robot_drivers.arm.FrankaArm`, so limits enforced here cannot be
bypassed by a new caller. The layer

- clamps joint position targets into the joint limits (minus a margin),
- limits the step per command (``max_joint_step``) and the implied joint velocity,
- slows a joint approaching a position limit so that it can still stop before it when braking
  at ``ddq_max`` (the backends' servos shape their reference the same way:
  :mod:`robot_drivers.motion`),
- keeps the end-effector inside a workspace box (forward kinematics of the *target*): a
  position target beyond a face slides along it (the outward part of the move dropped, the
  rest kept, as a table stops a hand in simulation), and what is still outside is shortened,
- latches an e-stop that refuses every motion until :meth:`SafetyLayer.reset_estop`,
- tracks command staleness: the arm holds position after ``watchdog_ms`` without a fresh
  command. Freshness is the time the command was *issued* (``issued_at``), not the time it was
  executed: a long trajectory sampled tick by tick from one old message is stale like the
  message (the client that sent it may be dead), and is refused once ``watchdog_ms`` passed,
- checks the *measured* joints (:meth:`SafetyLayer.check_measured`): an arm found faster than
  ``dq_max`` or past a position limit is e-stopped by :class:`~robot_drivers.arm.FrankaArm`,
  whatever let it get there.

Every clamp and refusal is counted in :attr:`SafetyLayer.counters`. The first of a kind is
logged at once; its repeats are summarised in one line per ``log_interval_s`` for all kinds
(``[arm] safety: 12 velocity clamps, 3 workspace clamps in the last 30 s``,
:class:`rlinf_contracts.event_log.EventSummary`), so a nominal run that clamps on every fast
command does not flood the log.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlinf_contracts.event_log import EventSummary
from robot_drivers.kinematics import forward_kinematics
from robot_drivers.motion import stopping_speed
from robot_drivers.types import (
    PANDA_DDQ_MAX,
    PANDA_DQ_MAX,
    PANDA_GRIPPER_MAX_WIDTH,
    PANDA_Q_MAX,
    PANDA_Q_MIN,
    CommandOutcome,
)

log = logging.getLogger(__name__)
LIMIT_ESTOP = "limit violation"  # the reason prefix of a latch a measured-limit check sets

EVENT_WORDS: dict[str, tuple[str, str]] = {
    "position_limit": ("position clamp", "position clamps"),
    "velocity_limit": ("velocity clamp", "velocity clamps"),
    "braking": ("braking slow-down", "braking slow-downs"),
    "max_step": ("step clamp", "step clamps"),
    "workspace": ("workspace clamp", "workspace clamps"),
    "gripper_limit": ("gripper clamp", "gripper clamps"),
}
"""How a summary words the count of an event kind; kinds not named here read ``3 x kind``."""
SLIDE_TOLERANCE_M = 0.01
"""A position target beyond the workspace box slides along it while the measured end effector is
at most this far outside (m): a servo pushed against a face settles a few mm past it (measured:
3 mm on franky-sim); farther out, only moves that come back pass."""


def describe_event(kind: str, n: int) -> str:
    """``describe_event("velocity_limit", 12)`` -> ``12 velocity clamps``."""
    words = EVENT_WORDS.get(kind)
    if words is None:
        return f"{n} x {kind}"
    return f"{n} {words[0] if n == 1 else words[1]}"


class SafetyConfigError(ValueError):
    """A safety config value is inconsistent; the message names the field."""


@dataclass
class SafetyConfig:
    """Limits of one arm. Tuples (not arrays) so YAML configs map onto them one to one."""

    q_min: tuple[float, ...] = field(
        default=PANDA_Q_MIN, metadata={"help": "joint lower limits (rad)"}
    )
    q_max: tuple[float, ...] = field(
        default=PANDA_Q_MAX, metadata={"help": "joint upper limits (rad)"}
    )
    q_margin: float = field(
        default=0.05, metadata={"help": "stay this far (rad) inside the limits"}
    )
    dq_max: tuple[float, ...] = field(
        default=PANDA_DQ_MAX, metadata={"help": "joint speed limits (rad/s)"}
    )
    ddq_max: tuple[float, ...] = field(
        default=PANDA_DDQ_MAX,
        metadata={"help": "joint accelerations (rad/s^2) for braking before the position limits"},
    )
    velocity_scale: float = field(
        default=0.5, metadata={"help": "fraction of dq_max commands may use"}
    )
    max_joint_step: float = field(
        default=0.15, metadata={"help": "max joint change per command (rad)"}
    )
    workspace_min: tuple[float, float, float] = field(
        default=(0.15, -0.6, 0.02),
        metadata={"help": "end-effector box lower corner, base frame (m)"},
    )
    workspace_max: tuple[float, float, float] = field(
        default=(0.85, 0.6, 1.0), metadata={"help": "end-effector box upper corner, base frame (m)"}
    )
    watchdog_ms: float = field(
        default=300.0, metadata={"help": "hold position after this long without a command"}
    )
    gripper_max_width: float = field(
        default=PANDA_GRIPPER_MAX_WIDTH, metadata={"help": "gripper opening limit (m)"}
    )
    log_interval_s: float = field(
        default=30.0,
        metadata={
            "help": "seconds between two summaries of repeated safety events (the first event "
            "of a kind is logged at once)"
        },
    )

    def validate(self) -> None:
        n = len(self.q_min)
        for name in ("q_max", "dq_max", "ddq_max"):
            if len(getattr(self, name)) != n:
                raise SafetyConfigError(
                    f"safety.{name} has {len(getattr(self, name))} entries, q_min has {n}"
                )
        bad = [
            i for i in range(n) if self.q_min[i] + self.q_margin >= self.q_max[i] - self.q_margin
        ]
        if bad:
            raise SafetyConfigError(
                f"safety.q_min/q_max leave no room at joints {bad} with q_margin={self.q_margin}"
            )
        if any(a >= b for a, b in zip(self.workspace_min, self.workspace_max)):
            raise SafetyConfigError(
                f"safety.workspace_min {self.workspace_min} must be below workspace_max "
                f"{self.workspace_max}"
            )
        if min(self.dq_max) <= 0 or min(self.ddq_max) <= 0:
            raise SafetyConfigError(
                f"safety.dq_max {self.dq_max} and ddq_max {self.ddq_max} must be > 0"
            )
        if self.max_joint_step <= 0 or self.watchdog_ms <= 0 or not 0 < self.velocity_scale <= 1:
            raise SafetyConfigError(
                "safety.max_joint_step and watchdog_ms must be > 0, velocity_scale in (0, 1]"
            )

    @property
    def dof(self) -> int:
        return len(self.q_min)


class SafetyLayer:
    """Stateful filter between callers and a backend (one per arm)."""

    def __init__(
        self,
        cfg: SafetyConfig | None = None,
        name: str = "arm",
        fk: Callable[[np.ndarray], np.ndarray] | None = forward_kinematics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg or SafetyConfig()
        self.cfg.validate()
        self.name = name
        self._fk = fk
        self._clock = clock
        self._lo = np.asarray(self.cfg.q_min) + self.cfg.q_margin
        self._hi = np.asarray(self.cfg.q_max) - self.cfg.q_margin
        self._dq_max = np.asarray(self.cfg.dq_max) * self.cfg.velocity_scale
        self._ddq_max = np.asarray(self.cfg.ddq_max, dtype=np.float64)
        self._past_limit = np.zeros(
            self.cfg.dof, dtype=bool
        )  # joints found past a limit at the last check
        self._ws_lo, self._ws_hi = (
            np.asarray(self.cfg.workspace_min),
            np.asarray(self.cfg.workspace_max),
        )
        self.counters: collections.Counter[str] = collections.Counter()
        self.events = EventSummary(
            f"[{name}] safety",
            self.cfg.log_interval_s,
            clock=clock,
            describe=describe_event,
            logger=log,
            level=logging.WARNING,
        )
        self._estop_reason: str | None = None
        self.last_command_time: float | None = None  # when the last command went to the backend
        self.last_issued_time: float | None = None  # when the source of the last command was issued
        self._last_target: np.ndarray | None = None

    # ---- events -------------------------------------------------------------------------
    def record(self, kind: str, detail: str) -> None:
        """Count an event; log it at once if its kind is new, else in the next summary."""
        self.counters[kind] += 1
        self.events.note(kind, f"[{self.name}] safety {kind}: {detail}")

    # ---- e-stop -------------------------------------------------------------------------
    @property
    def estopped(self) -> bool:
        return self._estop_reason is not None

    @property
    def estop_reason(self) -> str | None:
        """Why the latch is set (None when it is not)."""
        return self._estop_reason

    def estop(self, reason: str = "requested") -> None:
        """Latch the e-stop: every motion command is refused until :meth:`reset_estop`."""
        if not self.estopped:
            self._estop_reason = reason
            self.record("estop", f"latched ({reason}); motion refused until reset")

    def estop_refusal(self) -> str:
        """Why motion is refused while the e-stop is latched, and what to do."""
        return f"refused: e-stop is active ({self._estop_reason}); call reset_estop first"

    def reset_estop(self) -> bool:
        """Release the latch; returns whether it was latched."""
        was = self.estopped
        self._estop_reason = None
        if was:
            log.warning("[%s] safety estop reset", self.name)
        return was

    # ---- watchdog -----------------------------------------------------------------------
    def note_command(self, now: float | None = None, issued_at: float | None = None) -> None:
        """A command went out at ``now``; its source (a message, a trajectory) was issued at
        ``issued_at`` (default: now). The watchdog counts from ``issued_at``."""
        self.last_command_time = self._clock() if now is None else now
        self.last_issued_time = self.last_command_time if issued_at is None else issued_at

    def is_stale(self, now: float | None = None) -> bool:
        """True once ``watchdog_ms`` passed since the last accepted command was issued (never
        commanded: False)."""
        if self.last_issued_time is None:
            return False
        now = self._clock() if now is None else now
        return (now - self.last_issued_time) * 1000.0 > self.cfg.watchdog_ms

    # ---- filters ------------------------------------------------------------------------
    def _refuse(self, q_now: np.ndarray, kind: str, detail: str) -> CommandOutcome:
        self.record(kind, detail)
        return CommandOutcome(
            target=np.asarray(q_now, dtype=np.float64).copy(),
            events=(kind,),
            refused=True,
            reason=detail,
        )

    def _refuse_held(
        self, q_now: np.ndarray, issued_at: float | None, what: str
    ) -> CommandOutcome | None:
        """The refusals every kind of command meets first, whatever it asks: none is taken while
        e-stopped, and none whose source was issued over ``watchdog_ms`` ago (``what`` names the
        command in the reason); None when the command may be filtered."""
        if self.estopped:
            return self._refuse(q_now, "estop_refused", self.estop_refusal())
        if issued_at is None:
            return None
        age_ms = (self._clock() - issued_at) * 1000.0
        if age_ms <= self.cfg.watchdog_ms:
            return None
        return self._refuse(
            q_now,
            "stale_refused",
            f"{what} issued {age_ms:.0f} ms ago > watchdog {self.cfg.watchdog_ms:.0f} ms "
            "(its sender went quiet); holding",
        )

    def _outside(self, q: np.ndarray) -> float:
        """Distance (m) of the end effector at joints ``q`` outside the workspace box (0 inside)."""
        if self._fk is None:
            return 0.0
        p = self._fk(q)[:3, 3]
        return float(
            np.linalg.norm(np.maximum(self._ws_lo - p, 0) + np.maximum(p - self._ws_hi, 0))
        )

    def _slide(self, q_now: np.ndarray, target: np.ndarray) -> np.ndarray:
        """``target`` (the same object when nothing changes) with its end effector pulled back
        onto the box faces it would cross, by the least joint motion (damped least squares on a
        numerical position Jacobian of the layer's ``fk``), the rest of the move kept.

        Why not only shorten the move: a policy pushing down and forward against the box floor
        would stop dead (every target is below it), where in simulation the table stopped the
        hand and it slid on to its goal (measured on franky-sim: the demo reach policy stuck on
        the floor 15 cm short of low goals). Only while the measured arm is inside the box or
        within :data:`SLIDE_TOLERANCE_M` of it (a servo settles a little past the face it is
        pushed against); an arm farther out only comes back as :meth:`_workspace` allows, and
        what this does not mend is shortened there.
        """
        if self._fk is None or self._outside(target) == 0.0:
            return target
        if self._outside(q_now) > SLIDE_TOLERANCE_M:
            return target
        q = target.copy()
        for _ in range(3):
            p = self._fk(q)[:3, 3]
            err = np.clip(p, self._ws_lo + 1e-4, self._ws_hi - 1e-4) - p
            if not err.any():
                break
            jac = np.empty((3, q.size))
            for j in range(q.size):  # numerical: the backend's fk may not be the Panda's
                dq = np.zeros(q.size)
                dq[j] = 1e-6
                jac[:, j] = (self._fk(q + dq)[:3, 3] - p) / 1e-6
            q = q + jac.T @ np.linalg.solve(jac @ jac.T + 1e-6 * np.eye(3), err)
        return np.clip(q, self._lo, self._hi)

    def _workspace(self, q_now: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, bool]:
        """Shrink the move towards ``q_now`` until the target EE is inside the box (bisection)."""
        out_target = self._outside(target)
        if out_target == 0.0:
            return target, False
        if self._outside(q_now) > 0.0:  # already outside: allow only moves that get closer
            return (target, False) if out_target < self._outside(q_now) else (q_now.copy(), True)
        lo, hi = 0.0, 1.0
        for _ in range(12):
            mid = (lo + hi) / 2
            if self._outside(q_now + mid * (target - q_now)) == 0.0:
                lo = mid
            else:
                hi = mid
        return q_now + lo * (target - q_now), True

    def filter_joint_positions(
        self, target: np.ndarray, q_now: np.ndarray, dt: float, issued_at: float | None = None
    ) -> CommandOutcome:
        """Safe version of a joint position ``target`` given the measured ``q_now``.

        ``dt`` is the time the move may take (the time since the previous command). Per joint,
        the target moves at most ``velocity_scale * dq_max * dt`` from the previous target
        (``velocity_limit``) and lies at most ``max_joint_step`` from the measured joints
        (``max_step``). ``issued_at``: when the command's source was issued (a trajectory
        message); older than ``watchdog_ms`` is refused (``stale_refused``).
        """
        q_now = np.asarray(q_now, dtype=np.float64)
        target = np.asarray(target, dtype=np.float64)
        refused = self._refuse_held(q_now, issued_at, "command")
        if refused is not None:
            return refused
        if target.shape != q_now.shape:
            return self._refuse(q_now, "bad_shape", f"target shape {target.shape} != {q_now.shape}")
        if not np.all(np.isfinite(target)):
            return self._refuse(q_now, "non_finite", f"target {target.tolist()} has NaN/inf")
        events = []
        clamped = np.clip(target, self._lo, self._hi)
        if not np.array_equal(clamped, target):
            events.append("position_limit")
            self.record(
                "position_limit",
                f"joints {np.flatnonzero(clamped != target).tolist()} "
                f"clamped {np.round(target, 4).tolist()} -> {np.round(clamped, 4).tolist()}",
            )
        # speed: relative to the previous target while the arm tracks it (a servo lags its
        # target by a steady error that must not count as speed), else to the measured joints
        ref = q_now
        if self._last_target is not None and np.all(
            np.abs(self._last_target - q_now) <= self.cfg.max_joint_step
        ):
            ref = self._last_target
        # scale the whole move, not each joint: clipping joints one by one would bend the path
        # (an end-effector straight line becomes a curve the policy never saw)
        v_step = self._dq_max * max(dt, 1e-3)
        limited = _limit_move(ref, clamped, v_step)
        if not np.array_equal(limited, clamped):
            events.append("velocity_limit")
            self.record(
                "velocity_limit",
                f"move of {np.round(np.abs(clamped - ref).max(), 4)} rad in {dt:.3f} s "
                f"exceeds {self.cfg.velocity_scale} x dq_max; scaled down",
            )
        braked = _limit_move(ref, limited, self._braking_step(ref, limited - ref, dt))
        if not np.array_equal(braked, limited):
            events.append("braking")
            self.record(
                "braking",
                f"joints {np.flatnonzero(braked != limited).tolist()} slowed to stop before "
                "their position limits",
            )
        limited = braked
        stepped = _limit_move(q_now, limited, self.cfg.max_joint_step)
        if not np.array_equal(stepped, limited):
            events.append("max_step")
            self.record(
                "max_step",
                f"target {np.round(np.abs(limited - q_now).max(), 4)} rad from the measured "
                f"joints > max_joint_step {self.cfg.max_joint_step}; shortened",
            )
        slid = self._slide(q_now, stepped)
        if slid is not stepped:  # the step (what goes out now) slides; still within the speed
            events.append("workspace")
            self.record(
                "workspace",
                f"end effector would leave box {self._ws_lo.tolist()}..{self._ws_hi.tolist()}; "
                "slid along it",
            )
            stepped = _limit_move(q_now, _limit_move(ref, slid, v_step), self.cfg.max_joint_step)
        safe, ws = self._workspace(q_now, stepped)
        if ws and "workspace" not in events:
            events.append("workspace")
            self.record(
                "workspace",
                f"end effector would leave box {self._ws_lo.tolist()}..{self._ws_hi.tolist()}; "
                "move shortened",
            )
        self.note_command(issued_at=issued_at)
        self._last_target = safe.copy()
        return CommandOutcome(target=safe, events=tuple(events))

    def _braking_step(self, q: np.ndarray, direction: np.ndarray, dt: float) -> np.ndarray:
        """Per joint, the largest move in ``dt`` from ``q`` (along the sign of ``direction``) after
        which the joint can still stop at ``ddq_max`` before its limit (minus the margin)."""
        dt = max(dt, 1e-3)
        room = np.maximum(np.where(direction > 0, self._hi - q, q - self._lo), 0.0)
        # arriving on the limit in this step is fine if the speed it sheds next step is allowed
        arrive = np.minimum(room, self._ddq_max * dt * dt)
        return np.maximum(np.maximum(stopping_speed(room, self._ddq_max, dt) * dt, arrive), 1e-12)

    def check_measured(self, q: np.ndarray, dq: np.ndarray) -> str | None:
        """Why the measured joints break the limits (``None`` when they do not): a joint faster
        than ``dq_max``, or past a position limit on entering it or while still moving outwards
        (an arm stopped past a limit may be reset and moved back in without a new alarm)."""
        self.events.poll()  # the periodic read: a burst of clamps that stopped is summarised
        q, dq = np.asarray(q, dtype=np.float64), np.asarray(dq, dtype=np.float64)
        if q.shape != (self.cfg.dof,) or dq.shape != (self.cfg.dof,):
            return (
                f"measured joint state has shape {q.shape} / {dq.shape}, expected ({self.cfg.dof},)"
            )
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(dq))):
            return f"measured joint state is not finite: q {q.tolist()}, dq {dq.tolist()}"
        lo, hi, v_lim = (
            np.asarray(self.cfg.q_min),
            np.asarray(self.cfg.q_max),
            np.asarray(self.cfg.dq_max),
        )
        fast = np.abs(dq) > v_lim
        if fast.any():
            i = int(np.argmax(np.abs(dq) / v_lim))
            return (
                f"joint {i + 1} moves at {abs(dq[i]):.3f} rad/s, above its limit {v_lim[i]} rad/s"
            )
        outside = (q < lo) | (q > hi)
        outwards = ((q < lo) & (dq < -1e-3)) | ((q > hi) & (dq > 1e-3))
        bad = outside & (~self._past_limit | outwards)
        self._past_limit = outside
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return f"joint {i + 1} at {q[i]:.4f} rad is past its limits [{lo[i]}, {hi[i]}] rad"
        return None

    def filter_pose_target(
        self, pose: np.ndarray, q_now: np.ndarray, issued_at: float | None = None
    ) -> CommandOutcome:
        """Safe version of an impedance target ``pose`` (4x4, base frame): refused while
        e-stopped, stale (issued over ``watchdog_ms`` ago) or non-finite; its position clamped
        into the workspace box (``workspace``). Joint limits and speed are the law's and the
        measured check's (:meth:`check_measured`): a torque loop has no joint target to clamp."""
        q_now = np.asarray(q_now, dtype=np.float64)
        pose = np.asarray(pose, dtype=np.float64)
        refused = self._refuse_held(q_now, issued_at, "target pose")
        if refused is not None:
            return refused
        if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
            return self._refuse(q_now, "non_finite", f"bad target pose {pose.tolist()}")
        events = []
        safe = pose.copy()
        if self._fk is not None:  # the box is in the frame of the arm's kinematics
            safe[:3, 3] = np.clip(pose[:3, 3], self._ws_lo, self._ws_hi)
        if not np.array_equal(safe, pose):
            events.append("workspace")
            self.record(
                "workspace",
                f"target position {np.round(pose[:3, 3], 4).tolist()} clamped into box "
                f"{self._ws_lo.tolist()}..{self._ws_hi.tolist()}",
            )
        self.note_command(issued_at=issued_at)
        self._last_target = None  # the next joint command is measured from the real joints
        return CommandOutcome(target=safe, events=tuple(events))

    def forget_target(self) -> None:
        """After a hold / e-stop / recovery the next move is measured from the real joints."""
        self._last_target = None

    def filter_joint_velocities(
        self, dq: np.ndarray, q_now: np.ndarray, dt: float
    ) -> CommandOutcome:
        """Safe joint velocity: speed limits, no motion past a joint limit or out of the box in
        ``dt``."""
        q_now = np.asarray(q_now, dtype=np.float64)
        dq = np.asarray(dq, dtype=np.float64)
        zero = np.zeros_like(q_now)
        if self.estopped:
            out = self._refuse(q_now, "estop_refused", self.estop_refusal())
            return CommandOutcome(target=zero, events=out.events, refused=True, reason=out.reason)
        if dq.shape != q_now.shape or not np.all(np.isfinite(dq)):
            out = self._refuse(q_now, "non_finite", f"bad velocity command {dq.tolist()}")
            return CommandOutcome(target=zero, events=out.events, refused=True, reason=out.reason)
        events = []
        v = np.clip(dq, -self._dq_max, self._dq_max)
        if not np.array_equal(v, dq):
            events.append("velocity_limit")
            self.record(
                "velocity_limit",
                f"{np.round(dq, 3).tolist()} clamped to +-{np.round(self._dq_max, 3).tolist()}",
            )
        # no faster towards a limit than the joint can still stop before it (0 at the limit)
        room = self._braking_step(q_now, v, dt) / max(dt, 1e-3)
        braked = np.where(
            (v != 0) & (np.abs(v) > room), np.sign(v) * np.where(room > 1e-9, room, 0.0), v
        )
        if not np.array_equal(braked, v):
            events.append("position_limit")
            self.record(
                "position_limit",
                f"joints {np.flatnonzero(braked != v).tolist()} slowed or stopped at their limit",
            )
            v = braked
        if self._outside(q_now + v * max(dt, 1e-3)) > self._outside(q_now):
            v = zero
            events.append("workspace")
            self.record("workspace", "velocity would leave the workspace box; stopped")
        self.note_command()
        return CommandOutcome(target=v, events=tuple(events))

    def filter_gripper_width(self, width: float) -> float:
        """``width`` clamped to [0, gripper_max_width] (callers refuse a non-finite one first)."""
        w = float(np.clip(width, 0.0, self.cfg.gripper_max_width))
        if w != width:
            self.record("gripper_limit", f"width {width} clamped to {w}")
        return w


def _limit_move(start: np.ndarray, target: np.ndarray, limit: np.ndarray | float) -> np.ndarray:
    """``target`` itself when every joint is within ``limit`` of ``start``; else the move shrunk
    as a whole (direction kept) until the most limited joint is at its limit."""
    delta = target - start
    over = float(np.max(np.abs(delta) / limit))
    return target if over <= 1.0 + 1e-9 else start + delta / over
