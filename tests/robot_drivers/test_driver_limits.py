"""Datasheet limits hold at the joints, not only in the target: the simulated arm driven at full
speed into its limits never moves faster than ``dq_max`` nor leaves ``[q_min, q_max]`` (checked at
every physics step, on simulated time); the reference shaper stops on its goal; an arm measured
past its limits is e-stopped."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from robot_drivers.arm import FrankaArm
from robot_drivers.motion import ReferenceShaper
from robot_drivers.safety import SafetyConfig
from robot_drivers.sim_arm import KinematicArmBackend
from robot_drivers.types import PANDA_DQ_MAX, PANDA_HOME, PANDA_Q_MAX, PANDA_Q_MIN

HOME = np.array(PANDA_HOME)
Q_MIN, Q_MAX, DQ_MAX = np.array(PANDA_Q_MIN), np.array(PANDA_Q_MAX), np.array(PANDA_DQ_MAX)
SIGNS = np.array([1, -1, 1, -1, 1, 1, -1])


class SimClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _joint7_far(t: float) -> np.ndarray:
    q = HOME.copy()
    q[6] = 10.0
    return q


def _all_beyond_then_reversed(t: float) -> np.ndarray:
    return HOME + (10.0 if t < 2.0 else -10.0) * SIGNS


def _joint1_and_7_reversal(t: float) -> np.ndarray:
    """Joint 7 is parallel to joint 1 in the home pose: the coupling that saturated joint 7."""
    q = HOME.copy()
    q[0] = q[6] = 10.0 if t < 0.7 else -10.0
    q[6] = -q[6]
    return q


def _drive_sim_arm(
    command: Callable[[float], np.ndarray], seconds: float
) -> tuple[float, float, FrankaArm]:
    """The robot node's path with the sim twin's safety config (full joint speed): a joint target
    every 10 ms driver tick (sampled from a message re-sent at 10 Hz); the joint state read after
    every 5 ms physics step. Returns (peak |dq| / dq_max, worst excess past a position limit)."""
    from robot_drivers.sim_arm import MujocoArmBackend

    clock = SimClock()
    backend = MujocoArmBackend(home=PANDA_HOME)
    arm = FrankaArm(
        backend,
        SafetyConfig(watchdog_ms=300, max_joint_step=0.3, velocity_scale=1.0),
        clock=clock,
        command_period_s=0.01,
    )
    arm.connect()
    arm.tick()
    ts = float(backend.fm.model.opt.timestep)
    per_tick, issued = int(round(0.01 / ts)), clock.t
    peak = excess = 0.0
    for k in range(int(round(seconds / ts))):
        t = k * ts
        if k % int(round(0.1 / ts)) == 0:
            issued = clock.t  # a fresh message every 100 ms
        if k % per_tick == 0:
            out = arm.move_joints(command(t), issued_at=issued)
            assert not out.refused, out.reason
        clock.t += ts
        arm.tick()
        st = arm.state()
        peak = max(peak, float(np.max(np.abs(st.dq) / DQ_MAX)))
        excess = max(excess, float(np.max(np.maximum(st.q - Q_MAX, Q_MIN - st.q))))
    return peak, excess, arm


@pytest.mark.sim
@pytest.mark.parametrize(
    "command,seconds",
    [(_joint7_far, 4.0), (_all_beyond_then_reversed, 4.0), (_joint1_and_7_reversal, 1.5)],
    ids=["joint7_to_10rad", "all_joints_beyond_then_reversed", "joint1_7_reversal"],
)
def test_sim_arm_never_leaves_its_datasheet_limits(
    command: Callable[[float], np.ndarray], seconds: float
) -> None:
    """Outside check: joint 7 commanded to 10 rad reached 1.56 x its speed limit and went 0.011 rad
    past its position limit (the servo overshot the safety-limited target)."""
    peak, excess, arm = _drive_sim_arm(command, seconds)
    assert peak <= 1.0, f"peak |dq| = {peak:.3f} x dq_max"
    assert excess <= 0.0, f"{excess:.4f} rad past a position limit"
    assert not arm.safety.estopped and arm.counters.get("limit_violation", 0) == 0
    assert arm.counters["position_limit"] > 0  # the commands really asked for more


def test_shaper_stops_on_its_goal_within_speed_and_acceleration() -> None:
    s = ReferenceShaper(HOME, speed_fraction=0.9)
    goal = HOME + np.array([0.5, -0.3, 0.0, 0.2, -1.0, 0.4, 2.0])
    prev_v, dt = np.zeros(7), 0.001
    for _ in range(3000):
        q = s.step(dt, goal=goal)
        assert np.all(np.abs(s.velocity) <= 0.9 * DQ_MAX + 1e-12)
        assert np.all(np.abs(s.velocity - prev_v) <= s.a_max * dt + 1e-9)
        assert np.all(
            (q - HOME) * np.sign(goal - HOME) <= np.abs(goal - HOME) + 1e-12
        )  # no overshoot
        prev_v = s.velocity
    assert np.allclose(q, goal) and np.all(s.velocity == 0.0)


def test_shaper_velocity_mode_brakes_before_the_position_limit() -> None:
    s = ReferenceShaper(HOME, speed_fraction=1.0)
    top = np.zeros(7)
    for _ in range(4000):
        q = s.step(0.001, velocity=DQ_MAX * SIGNS * 5.0)  # asks for 5 x dq_max, towards the limits
        top = np.maximum(top, np.abs(s.velocity))
        assert np.all(q >= Q_MIN) and np.all(q <= Q_MAX)
    assert np.all(top <= DQ_MAX + 1e-12)
    at_limit = np.where(SIGNS > 0, Q_MAX - s.margin, Q_MIN + s.margin)
    assert np.allclose(q, at_limit) and np.all(s.velocity == 0.0)


class _Measured(KinematicArmBackend):
    """A backend whose measured joints the test sets (what a servo overshoot would report)."""

    def set_measured(self, q: np.ndarray, dq: np.ndarray) -> None:
        self.q, self.dq = np.asarray(q, dtype=np.float64), np.asarray(dq, dtype=np.float64)

    def advance(self, now: float) -> None:  # the measured state stays what the test set
        pass


def test_measured_speed_or_position_past_the_limits_estops_the_arm() -> None:
    clock = SimClock()
    backend = _Measured()
    arm = FrankaArm(backend, SafetyConfig(), clock=clock)
    arm.connect()
    arm.tick()
    assert not arm.safety.estopped
    dq = np.zeros(7)
    dq[6] = 2.9  # joint 7 above 2.61 rad/s
    backend.set_measured(HOME, dq)
    arm.tick()
    assert arm.safety.estopped and arm.counters["limit_violation"] == 1
    out = arm.move_joints(HOME)
    assert (
        out.refused and "joint 7 moves at 2.900 rad/s" in out.reason and "reset_estop" in out.reason
    )

    q = HOME.copy()
    q[6] = Q_MAX[6] + 0.01  # stopped just past the limit
    backend.set_measured(q, np.zeros(7))
    assert arm.reset_estop()
    arm.tick()
    assert (
        arm.safety.estopped
        and "joint 7 at 2.9073 rad is past its limits" in arm.safety.estop_refusal()
    )
    # reset while stopped past the limit: no new alarm, and the way back in is allowed
    assert arm.reset_estop()
    arm.tick()
    assert not arm.safety.estopped
    out = arm.move_joints(HOME)
    assert not out.refused and out.target[6] < q[6]
    backend.set_measured(
        q + np.r_[np.zeros(6), 0.01], np.r_[np.zeros(6), 0.5]
    )  # further out: stop again
    arm.tick()
    assert arm.safety.estopped and arm.counters["limit_violation"] == 3


def test_a_scene_reset_releases_only_a_limit_estop() -> None:
    """A twin's scene reset may release the latch a measured limit set (the arm is back at its
    start pose), never an operator's e-stop."""
    backend = _Measured()
    arm = FrankaArm(backend, SafetyConfig(), clock=SimClock())
    arm.connect()
    assert arm.release_limit_estop() is None  # nothing latched
    q = HOME.copy()
    q[3] = Q_MAX[3] + 0.01  # pressed past a joint stop
    backend.set_measured(q, np.zeros(7))
    arm.tick()
    assert arm.safety.estopped
    released = arm.release_limit_estop()
    assert released is not None and "past its limits" in released and not arm.safety.estopped
    backend.set_measured(HOME, np.zeros(7))
    arm.estop("service call")
    assert arm.release_limit_estop() is None and arm.safety.estopped
