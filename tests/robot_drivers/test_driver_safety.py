"""Safety layer: limits clamp, stale commands hold, the e-stop latch refuses motion until reset."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from robot_drivers.arm import FrankaArm
from robot_drivers.kinematics import forward_kinematics
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
    layer = SafetyLayer(SafetyConfig(max_joint_step=10.0, velocity_scale=1.0, workspace_min=(-2, -2, -2),
                                     workspace_max=(2, 2, 2)))
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
    # the binding joint's limit, the slowest joints' v_step (clipping joint by joint would bend the path)
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


def test_workspace_box_shortens_a_move_that_leaves_it() -> None:
    q = np.array(PANDA_HOME)
    z_home = forward_kinematics(q)[2, 3]
    layer = SafetyLayer(SafetyConfig(workspace_max=(0.85, 0.6, z_home + 0.02), max_joint_step=1.0,
                                     velocity_scale=1.0))
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
    backend: KinematicArmBackend = arm.backend  # type: ignore[assignment]
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
    backend: KinematicArmBackend = arm.backend  # type: ignore[assignment]
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


def test_a_long_trajectory_from_a_silent_sender_stops_at_the_watchdog(arm: FrankaArm, clock: FakeClock) -> None:
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
    arm = FrankaArm(KinematicArmBackend(), SafetyConfig(velocity_scale=0.5, max_joint_step=0.3), clock=clock,
                    command_period_s=0.01)
    arm.connect()
    q0 = arm.state().q
    start, speed = clock.t, 2.0  # a trajectory asking 2 rad/s on joint 7 (limit 0.5 x 2.61)
    targets = []
    for k in range(200):
        clock.t += 0.018 if k % 2 else 0.002  # bunched: 18 ms, 2 ms, 18 ms ...
        targets.append(arm.move_joints(q0 + np.r_[np.zeros(6), speed * (clock.t - start)]).target[6])
    steps = np.diff(targets)
    dts = np.where(np.arange(1, 200) % 2, 0.018, 0.002)
    assert np.max(steps / dts) <= 0.5 * 2.61 + 1e-6  # no step faster than the limit
