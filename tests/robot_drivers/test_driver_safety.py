"""Safety layer: limits clamp, stale commands hold, the e-stop latch refuses motion until reset."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from robot_drivers.arm import FrankaArm
from robot_drivers.kinematics import apply_ee_delta, forward_kinematics
from robot_drivers.safety import SafetyConfig, SafetyConfigError, SafetyLayer
from robot_drivers.sim_arm import KinematicArmBackend
from robot_drivers.types import PANDA_HOME, PANDA_Q_MAX


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def arm(clock: FakeClock) -> FrankaArm:
    a = FrankaArm(KinematicArmBackend(), SafetyConfig(watchdog_ms=200), clock=clock)
    a.connect()
    return a


def test_position_target_beyond_limits_is_clamped_and_counted(caplog) -> None:
    layer = SafetyLayer(
        SafetyConfig(
            max_joint_step=10.0,
            velocity_scale=1.0,
            workspace_min=(-2, -2, -2),
            workspace_max=(2, 2, 2),
        )
    )
    q = np.array(PANDA_HOME)
    target = q.copy()
    target[0] = 10.0  # far beyond +2.8973
    with caplog.at_level(logging.WARNING):
        out = layer.filter_joint_positions(target, q, dt=100.0)
    assert out.target[0] == pytest.approx(PANDA_Q_MAX[0] - 0.05)
    assert np.allclose(out.target[1:], q[1:])
    assert out.events == ("position_limit",) and out.clamped and not out.refused
    assert layer.counters["position_limit"] == 1
    assert "position_limit" in caplog.text


def test_step_per_command_and_velocity_are_limited() -> None:
    cfg = SafetyConfig(max_joint_step=0.1, velocity_scale=0.5)
    layer = SafetyLayer(cfg)
    q = np.array(PANDA_HOME)
    out = layer.filter_joint_positions(q + 0.5, q, dt=1.0)
    assert np.allclose(out.target - q, 0.1) and out.events == ("max_step",)  # max_joint_step binds
    layer.forget_target()
    out = layer.filter_joint_positions(q + 0.5, q, dt=0.01)
    v_step = np.asarray(cfg.dq_max) * 0.5 * 0.01
    # speed binds, and the move is scaled as a whole (its direction kept): every joint moves by
    # the binding joint's limit, the slowest joints' v_step (clipping joint by joint would bend the
    # path)
    assert np.allclose(out.target - q, v_step.min()) and out.events == ("velocity_limit",)
    assert np.all(np.abs(out.target - q) <= v_step + 1e-12)
    # the next step is measured from the previous target while the arm lags it (servo error),
    # so a steady tracking lag is not mistaken for speed
    lagging = q + 0.5 * v_step.min()
    out2 = layer.filter_joint_positions(out.target + v_step, lagging, dt=0.01)
    assert out2.events == () and np.allclose(out2.target, out.target + v_step)
    assert layer.counters["max_step"] == 1 and layer.counters["velocity_limit"] == 1
    v = layer.filter_joint_velocities(np.full(7, 10.0), q, dt=0.01)
    assert np.allclose(v.target, np.asarray(cfg.dq_max) * 0.5)
    assert "velocity_limit" in v.events


def test_a_move_into_the_workspace_floor_slides_along_it() -> None:
    """Down and forward into the floor: the hand stays on the floor and still moves forward (as
    the table let it in simulation), where shortening the move would stop it dead."""
    q = np.array(PANDA_HOME)
    T0 = forward_kinematics(q)
    floor = T0[2, 3] - 0.01
    layer = SafetyLayer(
        SafetyConfig(workspace_min=(0.15, -0.6, floor), max_joint_step=1.0, velocity_scale=1.0)
    )
    target = apply_ee_delta(q, np.array([0.05, 0.0, -0.05, 0.0, 0.0, 0.0]))
    out = layer.filter_joint_positions(target, q, dt=1.0)
    assert "workspace" in out.events and layer.counters["workspace"] == 1
    T1 = forward_kinematics(out.target)
    assert floor - 1e-6 <= T1[2, 3] < floor + 2e-3  # on the floor
    assert T1[0, 3] - T0[0, 3] > 0.04  # most of the 5 cm forward kept
    # a servo settled just below the floor: the same move comes back onto it, and forward
    sagged = SafetyLayer(
        SafetyConfig(
            workspace_min=(0.15, -0.6, T0[2, 3] + 0.002), max_joint_step=1.0, velocity_scale=1.0
        )
    )
    T2 = forward_kinematics(sagged.filter_joint_positions(target, q, dt=1.0).target)
    assert T2[2, 3] >= T0[2, 3] + 0.002 - 1e-6 and T2[0, 3] - T0[0, 3] > 0.04
    # ... tick by tick too: a 1 mm step forward and down from 3 mm under the floor goes forward
    q_sag = apply_ee_delta(q, np.array([0.0, 0.0, -0.003, 0.0, 0.0, 0.0]))
    tick = apply_ee_delta(q_sag, np.array([0.001, 0.0, -0.001, 0.0, 0.0, 0.0]))
    on_floor = SafetyLayer(SafetyConfig(workspace_min=(0.15, -0.6, T0[2, 3]), max_joint_step=1.0))
    T3 = forward_kinematics(on_floor.filter_joint_positions(tick, q_sag, dt=0.01).target)
    assert T3[2, 3] >= T0[2, 3] - 1e-6 and T3[0, 3] - T0[0, 3] > 0.0005
    # far below it (farther than SLIDE_TOLERANCE_M): only moves that come back pass: held
    low = SafetyLayer(SafetyConfig(workspace_min=(0.15, -0.6, T0[2, 3] + 0.1), max_joint_step=1.0))
    assert np.array_equal(low.filter_joint_positions(target, q, dt=1.0).target, q)


def test_workspace_box_shortens_a_move_that_leaves_it() -> None:
    q = np.array(PANDA_HOME)
    z_home = forward_kinematics(q)[2, 3]
    layer = SafetyLayer(
        SafetyConfig(
            workspace_max=(0.85, 0.6, z_home + 0.02), max_joint_step=1.0, velocity_scale=1.0
        )
    )
    target = q.copy()
    target[1] -= 0.4  # shoulder back: the hand rises well above the box top
    assert forward_kinematics(target)[2, 3] > z_home + 0.02
    out = layer.filter_joint_positions(target, q, dt=1.0)
    assert "workspace" in out.events
    z = forward_kinematics(out.target)[2, 3]
    assert z <= z_home + 0.02 + 1e-6 and z > z_home  # moved as far as the box allows
    assert layer.counters["workspace"] == 1


def test_non_finite_targets_are_refused() -> None:
    layer = SafetyLayer()
    q = np.array(PANDA_HOME)
    out = layer.filter_joint_positions(np.full(7, np.nan), q, dt=0.1)
    assert out.refused and np.array_equal(out.target, q)
    assert layer.counters["non_finite"] == 1


def test_stale_commands_make_the_arm_hold(arm: FrankaArm, clock: FakeClock) -> None:
    backend: KinematicArmBackend = arm.backend  # type: ignore[assignment]  # sim backend
    q0 = arm.state().q
    arm.tick()
    arm.move_joints(q0 + 0.1)
    clock.t += 0.05
    arm.tick()  # moving towards the target
    moved = arm.state().q
    assert np.all(moved > q0) and not arm.holding
    clock.t += 0.25  # 300 ms since the command > 200 ms watchdog
    arm.tick()
    assert arm.holding and arm.counters["stale_hold"] == 1
    held = arm.state().q
    assert np.allclose(backend.target, held)
    clock.t += 1.0
    arm.tick()
    assert np.allclose(arm.state().q, held)  # did not continue to the old target
    assert arm.counters["stale_hold"] == 1  # counted once per stale episode
    arm.move_joints(held + 0.05)  # a fresh command resumes motion
    assert not arm.holding
    clock.t += 0.05
    arm.tick()
    assert np.all(arm.state().q > held)


def test_estop_latch_refuses_motion_until_reset(arm: FrankaArm, clock: FakeClock) -> None:
    q0 = arm.state().q
    arm.estop("operator button")
    for _ in range(3):
        out = arm.move_joints(q0 + 0.1)
        assert out.refused and np.array_equal(out.target, q0)
        assert arm.move_velocities(np.ones(7)).refused
        assert not arm.gripper_move(0.01)
        clock.t += 0.1
        arm.tick()
    assert np.allclose(arm.state().q, q0)
    assert arm.counters["estop_refused"] == 9
    assert not arm.recover() or arm.safety.estopped  # error recovery does not release the latch
    assert arm.reset_estop()
    out = arm.move_joints(q0 + 0.05)
    assert not out.refused
    clock.t += 0.05
    arm.tick()
    assert np.all(arm.state().q > q0)


def test_robot_error_refuses_commands_until_recovery(arm: FrankaArm) -> None:
    backend: KinematicArmBackend = arm.backend  # type: ignore[assignment]  # sim backend
    backend.inject_error()
    q = arm.state().q
    assert arm.move_joints(q + 0.01).refused
    assert arm.counters["error_refused"] == 1
    assert arm.recover()
    assert not arm.move_joints(q + 0.01).refused


def test_ee_delta_moves_the_hand_by_the_delta(arm: FrankaArm, clock: FakeClock) -> None:
    p0 = arm.state().ee_pose.position
    arm.tick()
    out = arm.move_ee_delta(np.array([0.02, 0.0, -0.01, 0, 0, 0]))
    assert not out.refused and not out.events
    clock.t += 0.15
    arm.tick()
    assert np.allclose(arm.state().ee_pose.position - p0, [0.02, 0.0, -0.01], atol=1e-3)


def test_bad_config_names_the_field() -> None:
    with pytest.raises(SafetyConfigError, match="workspace_min"):
        SafetyLayer(SafetyConfig(workspace_min=(1, 0, 0), workspace_max=(0, 1, 1)))
    with pytest.raises(SafetyConfigError, match="q_max"):
        SafetyLayer(SafetyConfig(q_max=(1.0,)))


def test_a_long_trajectory_from_a_silent_sender_stops_at_the_watchdog(
    arm: FrankaArm, clock: FakeClock
) -> None:
    """Outside check: a single 4 s trajectory from a client that then died ran to the end."""
    q0 = arm.state().q
    issued = clock.t  # one message, then silence: the node samples it every tick
    for k in range(1, 41):  # 4 s at 10 Hz, 0.01 rad per tick along joint 1
        clock.t += 0.1
        out = arm.move_joints(q0 + np.r_[0.01 * k, np.zeros(6)], issued_at=issued)
        arm.tick()
        if out.refused:
            break
    assert out.events == ("stale_refused",) and k == 3  # refused once 200 ms (watchdog) had passed
    assert arm.holding and arm.counters["stale_hold"] == 1
    held = arm.state().q
    clock.t += 1.0
    arm.tick()
    assert np.allclose(arm.state().q, held) and held[0] - q0[0] < 0.03
    assert not arm.move_joints(held, issued_at=clock.t).refused  # a fresh message moves again


def test_holding_still_records_no_safety_event(arm: FrankaArm, clock: FakeClock) -> None:
    """Outside check: 743 max_step events while only holding (float rounding). A target equal
    to the measured joints, or the previous target, re-sent every tick, is no event at all."""
    q = arm.state().q + 1e-12  # rounding noise of a round trip through a message
    for _ in range(500):
        clock.t += 0.01
        out = arm.move_joints(q, issued_at=clock.t)
        arm.tick()
        assert not out.events
    assert arm.counters == {}


def test_bunched_ticks_do_not_exceed_the_speed_limit(clock: FakeClock) -> None:
    """Outside check: 0.84 x dq_max measured with velocity_scale 0.5. Ticks arriving late and
    then early (bunched) may not move further than the limit allows in the time that passed."""
    arm = FrankaArm(
        KinematicArmBackend(),
        SafetyConfig(velocity_scale=0.5, max_joint_step=0.3),
        clock=clock,
        command_period_s=0.01,
    )
    arm.connect()
    q0 = arm.state().q
    start, speed = clock.t, 2.0  # a trajectory asking 2 rad/s on joint 7 (limit 0.5 x 2.61)
    targets = []
    for k in range(200):
        clock.t += 0.018 if k % 2 else 0.002  # bunched: 18 ms, 2 ms, 18 ms ...
        targets.append(
            arm.move_joints(q0 + np.r_[np.zeros(6), speed * (clock.t - start)]).target[6]
        )
    steps = np.diff(targets)
    dts = np.where(np.arange(1, 200) % 2, 0.018, 0.002)
    assert np.max(steps / dts) <= 0.5 * 2.61 + 1e-6  # no step faster than the limit


# ---- branches: non-finite input, limit and workspace stops, gripper limits, velocity watchdog ----
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_commands_are_refused_with_a_reason_and_the_arm_held(
    arm: FrankaArm, clock: FakeClock, bad: float
) -> None:
    backend: KinematicArmBackend = arm.backend  # type: ignore[assignment]  # sim backend
    q0 = arm.state().q
    target = q0.copy()
    target[2] = bad
    out = arm.move_joints(target)
    assert out.refused and out.events == ("non_finite",) and "NaN/inf" in out.reason
    assert np.array_equal(out.target, q0) and np.array_equal(backend.target, q0)
    v = q0 * 0.0
    v[4] = bad
    out = arm.move_velocities(v)
    assert out.refused and out.events == ("non_finite",) and "bad velocity command" in out.reason
    assert np.array_equal(out.target, np.zeros(7)) and backend.velocity is None  # nothing commanded
    out = arm.move_ee_delta(np.array([0.01, 0.0, bad, 0.0, 0.0, 0.0]))
    assert out.refused and "non_finite" in out.events
    assert not arm.gripper_move(bad) and "non-finite" in arm.last_refusal
    assert not arm.gripper_grasp(0.01, force=bad)
    clock.t += 0.5
    arm.tick()
    assert np.allclose(arm.state().q, q0)  # the arm never moved
    assert arm.counters["non_finite"] == 5
    wrong = arm.move_joints(np.zeros(6))
    assert wrong.refused and wrong.events == ("bad_shape",) and "(6,)" in wrong.reason


def test_velocity_command_stops_at_a_joint_limit(clock: FakeClock) -> None:
    layer = SafetyLayer(
        SafetyConfig(velocity_scale=1.0, workspace_min=(-2, -2, -2), workspace_max=(2, 2, 2)),
        clock=clock,
    )
    hi = np.asarray(PANDA_Q_MAX) - layer.cfg.q_margin
    q = np.array(PANDA_HOME)
    q[6] = hi[6]  # at joint 7's (margin) limit
    v = np.zeros(7)
    v[6], v[0] = 1.0, 0.2
    out = layer.filter_joint_velocities(v, q, dt=0.01)
    assert (
        out.target[6] == 0.0
        and out.target[0] == pytest.approx(0.2)
        and "position_limit" in out.events
    )
    out = layer.filter_joint_velocities(-v, q, dt=0.01)  # away from the limit: allowed
    assert out.target[6] == pytest.approx(-1.0) and out.events == ()
    q[6] = hi[6] - 0.01  # close: slowed so that it can stop before the limit at ddq_max
    out = layer.filter_joint_velocities(v, q, dt=0.01)
    assert 0.0 < out.target[6] < 1.0 and "position_limit" in out.events
    assert out.target[6] * 0.01 + out.target[6] ** 2 / (2 * layer.cfg.ddq_max[6]) <= 0.01 + 1e-9


def test_position_targets_brake_before_a_joint_limit(clock: FakeClock) -> None:
    """A target running at full speed into joint 7's limit slows down on the way (not a jump to a
    stop at the clamp) and never passes the limit."""
    layer = SafetyLayer(
        SafetyConfig(
            velocity_scale=1.0,
            max_joint_step=10.0,
            workspace_min=(-2, -2, -2),
            workspace_max=(2, 2, 2),
        ),
        clock=clock,
    )
    q = np.array(PANDA_HOME)
    hi, a = PANDA_Q_MAX[6] - layer.cfg.q_margin, layer.cfg.ddq_max[6]
    targets = [q[6]]
    for _ in range(300):
        goal = q.copy()
        goal[6] = 10.0
        q = layer.filter_joint_positions(
            goal, q, dt=0.01
        ).target  # an ideal servo: measured = target
        targets.append(q[6])
    speed = np.diff(targets) / 0.01
    assert max(targets) <= hi + 1e-12 and targets[-1] == pytest.approx(hi)
    assert speed.max() <= layer.cfg.dq_max[6] + 1e-9
    assert np.all(
        np.diff(speed)[speed[1:] < speed[:-1]] >= -a * 0.01 - 1e-6
    )  # braking at <= ddq_max
    assert layer.counters["braking"] > 0


def test_workspace_stops_velocity_and_only_lets_an_outside_arm_come_back(clock: FakeClock) -> None:
    q = np.array(PANDA_HOME)
    z = forward_kinematics(q)[2, 3]
    layer = SafetyLayer(
        SafetyConfig(workspace_max=(0.85, 0.6, z + 1e-4), velocity_scale=1.0), clock=clock
    )
    up = np.zeros(7)
    up[1] = -0.5  # shoulder back: the hand rises through the box top
    out = layer.filter_joint_velocities(up, q, dt=0.1)
    assert np.array_equal(out.target, np.zeros(7)) and "workspace" in out.events
    out = layer.filter_joint_velocities(-up, q, dt=0.1)  # down, into the box: allowed
    assert out.target[1] == pytest.approx(0.5) and "workspace" not in out.events
    # already outside (the box top moved below the hand): only moves that get closer pass
    low = SafetyLayer(
        SafetyConfig(workspace_max=(0.85, 0.6, z - 0.05), max_joint_step=1.0, velocity_scale=1.0),
        clock=clock,
    )
    higher = q.copy()
    higher[1] -= 0.05
    out = low.filter_joint_positions(higher, q, dt=1.0)
    assert np.array_equal(out.target, q) and out.events == ("workspace",)
    lower = q.copy()
    lower[1] += 0.05
    out = low.filter_joint_positions(lower, q, dt=1.0)
    assert np.allclose(out.target, lower) and out.events == ()


@pytest.mark.parametrize("width,expected", [(-0.01, 0.0), (0.5, 0.08), (0.03, 0.03)])
def test_gripper_width_is_clamped_to_its_range(
    arm: FrankaArm, clock: FakeClock, width: float, expected: float
) -> None:
    assert arm.gripper_move(width)
    assert arm.backend.width_target == pytest.approx(expected)  # type: ignore[attr-defined]  # kinematic
    assert arm.gripper_grasp(width)
    assert arm.backend.width_target == pytest.approx(expected)  # type: ignore[attr-defined]  # kinematic
    assert arm.counters.get("gripper_limit", 0) == (0 if width == expected else 2)


def test_gripper_commands_refused_while_estopped_say_why(arm: FrankaArm) -> None:
    arm.estop("operator button")
    for call, action in [
        (lambda: arm.gripper_move(0.08), "gripper move"),
        (arm.gripper_grasp, "grasp"),
        (arm.gripper_homing, "homing"),
    ]:
        arm.last_refusal = ""
        assert not call()
        assert arm.last_refusal == (
            f"{action} refused: e-stop is active (operator button); call reset_estop first"
        )
    out = arm.move_joints(arm.state().q)
    assert (
        out.refused
        and out.reason == "refused: e-stop is active (operator button); call reset_estop first"
    )
    arm.reset_estop()
    assert arm.gripper_move(0.08)


@pytest.mark.parametrize("backend_kind", ["kinematic", pytest.param("sim", marks=pytest.mark.sim)])
def test_a_velocity_command_not_refreshed_stops_at_the_watchdog(
    clock: FakeClock, backend_kind: str
) -> None:
    """Counted in driver periods of a simulated clock: moving before watchdog_ms, held after."""
    if backend_kind == "sim":
        from robot_drivers.sim_arm import MujocoArmBackend

        backend = MujocoArmBackend(home=PANDA_HOME)
    else:
        backend = KinematicArmBackend()
    period, watchdog_ms = 0.01, 200.0
    arm = FrankaArm(
        backend, SafetyConfig(watchdog_ms=watchdog_ms), clock=clock, command_period_s=period
    )
    arm.connect()
    arm.tick()
    q0 = arm.state().q
    v = np.zeros(7)
    v[0] = 0.5
    assert not arm.move_velocities(v).refused  # once, never refreshed
    ticks_to_watchdog = int(watchdog_ms / 1000 / period)
    for k in range(1, 3 * ticks_to_watchdog):
        clock.t += period
        arm.tick()
        if k < ticks_to_watchdog:
            assert not arm.holding, f"held after {k} periods, before the watchdog"
        if arm.holding:
            break
    assert (
        arm.holding
        and k in (ticks_to_watchdog, ticks_to_watchdog + 1)
        and arm.counters["stale_hold"] == 1
    )
    moved = arm.state().q[0] - q0[0]
    assert moved > 0.02  # it did run at the commanded speed until then
    # then it stops and stays: no more drift along the old velocity
    for _ in range(ticks_to_watchdog):
        clock.t += period
        arm.tick()
    settled = arm.state().q[0]
    for _ in range(ticks_to_watchdog):
        clock.t += period
        arm.tick()
    assert abs(arm.state().q[0] - settled) < 1e-3 and abs(arm.state().dq[0]) < 0.02
    assert arm.state().q[0] - q0[0] < moved + 0.05
