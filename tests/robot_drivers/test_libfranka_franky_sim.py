"""The libfranka backend end to end against franky-sim (libfranka's wire protocol, MuJoCo).

Built through the normal factory path (``ArmConfig(backend="libfranka")`` -> :func:`make_arm`)
with ``realtime: ignore`` (no PREEMPT_RT kernel here). franky-sim simulates neither reflexes nor
error flags (its ``automatic_error_recovery`` only acknowledges), so the error path is provoked
as the robot PC would meet it: the robot goes silent (the server is paused) and libfranka's loop
fails with a NetworkException; and a torque law returns NaN. The ControlException (reflex) path
itself is covered against a fake pylibfranka in test_driver_backends.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from rlinf_contracts.config.errors import ConfigError
from robot_drivers.arm import FrankaArm
from robot_drivers.factory import ArmConfig, make_arm
from robot_drivers.libfranka_arm import LibfrankaArmBackend
from robot_drivers.safety import SafetyConfig
from robot_drivers.torque_control import JointPDLaw, TorqueInput, TorqueLawError, limit_torques
from robot_drivers.types import PANDA_HOME, RobotMode
from tests.robot_drivers.franky_sim import FrankySim, franky_sim  # noqa: F401 -- fixture

DEADLINE_S = 30.0  # generous: the simulator and these tests share a small, busy CPU


def wait_for(cond: Callable[[], bool], what: str, arm: FrankaArm | None = None) -> None:
    """Poll ``cond`` (ticking ``arm``'s watchdog like the robot node's timer) until it holds;
    the failure names what was awaited and, with ``arm``, its last state."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if arm is not None:
            arm.tick()
        if cond():
            return
        time.sleep(0.01)
    last = "" if arm is None else f"; last state {arm.state()}"
    raise AssertionError(f"not within {DEADLINE_S:.0f} s: {what}{last}")


def drive_to(arm: FrankaArm, target: np.ndarray, atol: float = 5e-3) -> None:
    """Send ``target`` every tick, as the robot node streams a trajectory, until reached."""

    def reached() -> bool:
        assert not arm.move_joints(target).refused, arm.last_refusal
        return bool(np.allclose(arm.state().q, target, atol=atol))

    wait_for(reached, f"joints at {np.round(target, 3).tolist()}", arm)


def reference_frozen(arm: FrankaArm, pause_s: float = 0.05) -> bool:
    """The joints the driver commands (the robot's ``q_d``) did not change in ``pause_s``."""
    before = np.array(arm.backend.robot_state.q_d)
    time.sleep(pause_s)
    arm.tick()
    return bool(np.array_equal(arm.backend.robot_state.q_d, before))


@pytest.fixture(scope="module")
def arm(franky_sim: FrankySim) -> Iterator[FrankaArm]:  # noqa: F811 -- the fixture above
    cfg = ArmConfig(
        name="fr3",
        backend="libfranka",
        ip=franky_sim.host,
        realtime="ignore",
        joint_prefix="fr3_",
        safety=SafetyConfig(watchdog_ms=200.0),
    )
    a = make_arm(cfg)
    a.connect()
    yield a
    a.disconnect()


def test_connects_and_reads_the_state(arm: FrankaArm) -> None:
    st = arm.state()
    assert st.q.shape == (7,) and st.errors == () and not st.has_error
    assert st.mode in (RobotMode.IDLE, RobotMode.MOVE)
    assert 0.2 < st.ee_pose.position[0] < 0.8  # the flange is in front of the base
    assert np.isclose(np.linalg.norm(st.ee_pose.quat_xyzw), 1.0)
    assert 0.0 <= st.gripper.width <= st.gripper.max_width == pytest.approx(0.08)
    assert arm.backend.control_mode == "position"


def test_homes_and_streams_joint_positions_to_a_target(arm: FrankaArm) -> None:
    backend = arm.backend
    cycles = backend.cycles
    home = np.array(PANDA_HOME)
    drive_to(arm, home)
    target = home + np.array([0.2, 0.1, -0.15, 0.2, 0.0, 0.1, -0.3])
    drive_to(arm, target)
    assert backend.cycles - cycles > 500  # the driver's own 1 kHz loop carried the motion
    arm.settle()


def test_gripper_moves_grasps_and_homes(arm: FrankaArm) -> None:
    # the gripper runs in a process of its own (arm.gripper_process): a command returns once
    # sent, gripper_wait waits for its motion
    assert arm.gripper_move(0.07, 0.05) and arm.gripper_wait(DEADLINE_S)
    assert arm.gripper_state().width == pytest.approx(0.07, abs=0.005)
    assert arm.gripper_move(0.02, 0.05) and arm.gripper_wait(DEADLINE_S)
    assert arm.gripper_state().width == pytest.approx(0.02, abs=0.005)
    # nothing between the fingers: closing to 1 cm is a successful grasp of a 1 cm "object"
    assert arm.gripper_grasp(0.01, 0.05, force=20.0, epsilon_inner=0.01, epsilon_outer=0.01)
    assert arm.gripper_wait(DEADLINE_S)
    assert arm.gripper_homing() and arm.gripper_wait(DEADLINE_S)
    # homing measures the opening (franky-sim then returns to the width before homing, where
    # the Franka Hand stays open)
    assert 0.07 < arm.gripper_state().max_width <= 0.08


# A gripper motion in the control process stalled the loop for the whole motion (libfranka's
# period up to 575 ms on franky-sim); in its process the loop keeps its 1 ms period. This bound
# (20 periods) leaves a busy CPU's scheduling room and still fails on any gripper motion.
MAX_PERIOD_S = 0.020


def test_gripper_motions_never_stall_the_control_loop(arm: FrankaArm) -> None:
    """The arm streams joint targets while the gripper moves six times: the loop's period
    (robot time between cycles, libfranka's ``duration``: a stalled loop shows as a long one
    however slow the simulator's clock runs) stays near 1 ms, no robot cycle goes without a
    command from us (beyond the bound), the robot reports no error, and every width is reached."""
    backend = arm.backend
    assert isinstance(backend, LibfrankaArmBackend) and backend.gripper_process
    home = np.array(PANDA_HOME)
    drive_to(arm, home)
    backend.reset_timing()
    cycles = backend.cycles
    for k, width in enumerate((0.02, 0.07, 0.03, 0.08, 0.01, 0.06)):
        target = home + np.array([0, 0, 0, 0.05 if k % 2 else -0.05, 0, 0, 0])
        assert arm.gripper_move(width, 0.1)
        # the arm keeps moving while the gripper does: the next command waits for the motion
        wait_for(
            lambda t=target, w=width: (
                not arm.move_joints(t).refused and abs(arm.gripper_state().width - w) < 0.005
            ),
            f"gripper at {width} m while the arm streams",
            arm,
        )
        assert arm.gripper_wait(DEADLINE_S)
    st = arm.state()
    assert st.errors == () and backend.control_mode == "position"
    assert backend.cycles - cycles > 1000  # the loop ran through all six motions
    assert backend.max_period_s <= MAX_PERIOD_S, backend.max_period_s
    assert backend.missed_cycles <= (backend.cycles - cycles) * 0.02, backend.missed_cycles
    drive_to(arm, home)


def test_watchdog_stops_the_arm_when_its_caller_goes_silent(arm: FrankaArm) -> None:
    drive_to(arm, np.array(PANDA_HOME))
    start = arm.state().q.copy()
    dq = np.array([0.3, 0, 0, 0, 0, 0, 0])
    # a live caller: velocity commands keep coming, the arm keeps turning joint 1
    wait_for(
        lambda: arm.move_velocities(dq).refused is False and arm.state().q[0] > start[0] + 0.05,
        "joint 1 turning under velocity commands",
        arm,
    )
    # the caller dies: no more commands; only the driver's timer (tick) runs. (A starved CPU
    # may already have let the watchdog fire between two live commands: count from here.)
    holds = arm.counters.get("stale_hold", 0)
    wait_for(lambda: arm.counters.get("stale_hold", 0) > holds, "the watchdog's hold", arm)
    # the driver stopped commanding motion: the reference it streams (the robot's q_d) is
    # frozen, and the arm sits on it
    wait_for(lambda: reference_frozen(arm), "the streamed reference to stop", arm)
    q_d = np.array(arm.backend.robot_state.q_d)
    for _ in range(10):
        assert reference_frozen(arm)
    # atol: franky-sim's own joint 7 servo chatters within 2 mrad around its reference
    wait_for(lambda: bool(np.allclose(arm.state().q, q_d, atol=5e-3)), "arm on its hold", arm)
    q_rest = arm.state().q
    assert q_rest[0] < start[0] + 1.0  # far less than a caller-less velocity loop would run


def test_lost_robot_is_reported_and_recovered(arm: FrankaArm, franky_sim: FrankySim) -> None:  # noqa: F811
    backend = arm.backend
    assert isinstance(backend, LibfrankaArmBackend) and backend.gripper_process
    gripper_pid = backend.gripper.worker.pid
    franky_sim.pause()
    try:
        wait_for(lambda: backend.control_mode == "stopped", "libfranka's loop to give up")
    finally:
        franky_sim.resume()
    st = arm.state()
    assert st.mode == RobotMode.REFLEX and any("NetworkException" in e for e in st.errors)
    out = arm.move_joints(st.q)
    assert out.refused and "error_recovery" in out.reason
    assert arm.recover()  # a new connection, automatic_error_recovery, the position loop again
    assert arm.state().errors == () and backend.control_mode == "position"
    # the hand went silent with the arm: its worker is replaced too, whether or not its own
    # read had timed out yet (a late timeout would otherwise take the recovered arm down)
    assert backend.gripper.worker.pid != gripper_pid
    drive_to(arm, np.array(PANDA_HOME) + np.array([0, 0, 0, 0.1, 0, 0, 0]))
    assert arm.gripper_move(0.05, 0.1) and arm.gripper_wait(DEADLINE_S)
    wait_for(lambda: arm.state().errors == (), "no error after the gripper's move", arm)


def test_torque_law_streams_and_hands_back_to_position_control(arm: FrankaArm) -> None:
    backend = arm.backend
    home = np.array(PANDA_HOME)
    drive_to(arm, home)
    goal = home + np.array([0.0, 0.0, 0.0, 0.15, 0.0, 0.0, 0.0])
    law = JointPDLaw(
        goal=goal,
        stiffness=(300.0, 300.0, 300.0, 300.0, 20.0, 20.0, 10.0),
        damping=(30.0, 30.0, 30.0, 30.0, 1.0, 1.0, 0.5),
    )
    seen: list[TorqueInput] = []

    def logged(inp: TorqueInput) -> np.ndarray:
        if not seen:
            seen.append(inp)
        return law(inp)

    backend.start_torque_control(logged)
    try:
        wait_for(lambda: backend.control_mode == "torque", "the torque loop")
        wait_for(lambda: abs(arm.state().q[3] - goal[3]) < 0.02, "joint 4 at the PD goal")
    finally:
        backend.stop_torque_control()
    assert backend.control_mode == "position" and arm.state().errors == ()
    inp = seen[0]
    assert inp.jacobian.shape == (6, 7) and inp.mass.shape == (7, 7)
    assert np.allclose(inp.mass, inp.mass.T, atol=1e-6) and np.all(np.linalg.eigvalsh(inp.mass) > 0)
    assert np.allclose(inp.o_t_ee[3], [0, 0, 0, 1]) and np.allclose(inp.tau_prev, 0.0)
    drive_to(arm, home)  # position control works again


def test_broken_torque_law_is_reported_and_recovered(arm: FrankaArm) -> None:
    backend = arm.backend
    backend.start_torque_control(lambda inp: np.full(7, np.nan))
    wait_for(lambda: backend.control_mode == "stopped", "the torque loop to stop")
    st = arm.state()
    assert st.has_error and any("TorqueLawError" in e for e in st.errors)
    assert arm.move_joints(st.q).refused
    assert arm.recover() and not arm.state().has_error
    drive_to(arm, np.array(PANDA_HOME))


# ---- without a server -------------------------------------------------------------------------
def test_bad_realtime_setting_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"arm\.realtime='soft'"):
        make_arm(ArmConfig(backend="libfranka", ip="127.0.0.1", realtime="soft"))


def test_torques_are_checked_clamped_and_rate_limited() -> None:
    prev = np.zeros(7)
    with pytest.raises(TorqueLawError, match="7 finite"):
        limit_torques(np.full(7, np.nan), prev)
    with pytest.raises(TorqueLawError, match="7 finite"):
        limit_torques(np.zeros(6), prev)
    tau = prev
    for _ in range(200):  # ramps at 1 Nm per cycle into the torque box, never past it
        nxt = limit_torques(np.array([500.0, -500, 0, 0, 50, -50, 3]), tau)
        assert np.all(np.abs(nxt - tau) <= 1.0 + 1e-12)
        tau = nxt
    assert tau.tolist() == [87.0, -87.0, 0.0, 0.0, 12.0, -12.0, 3.0]
