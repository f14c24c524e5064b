"""Backends: kinematics vs MuJoCo, the real-time MuJoCo arm, pylibfranka against its API surface,
dual-arm layout, cameras."""

from __future__ import annotations

import sys
import time
import types

import numpy as np
import pytest

from rlinf_contracts.rotations import (
    matrix_to_quat_xyzw,
    matrix_to_rotvec,
    quat_xyzw_to_matrix,
    rotvec_to_matrix,
)
from robot_drivers.arm import DriverError, FrankaArm
from robot_drivers.cameras import CameraConfig, CameraError, SimCamera, make_camera
from robot_drivers.factory import ArmConfig, make_arm
from robot_drivers.kinematics import F_T_HAND_TCP, apply_ee_delta, forward_kinematics
from robot_drivers.libfranka_arm import LibfrankaArmBackend, error_names, grip_site_pose
from robot_drivers.sim_arm import KinematicArmBackend
from robot_drivers.types import PANDA_HOME, RobotMode
from tests.robot_drivers.dual_arm import DualArm


def test_rotation_helpers_round_trip() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        rv = rng.normal(size=3)
        rv *= min(1.0, 3.0 / np.linalg.norm(rv))
        R = rotvec_to_matrix(rv)
        assert np.allclose(matrix_to_rotvec(R), rv, atol=1e-9)
        assert np.allclose(quat_xyzw_to_matrix(matrix_to_quat_xyzw(R)), R, atol=1e-9)


def test_ee_delta_ik_reaches_the_goal_in_orientation_too() -> None:
    q = np.array(PANDA_HOME)
    q2 = apply_ee_delta(q, np.array([0.03, -0.02, 0.01, 0.0, 0.0, 0.2]))
    T0, T1 = forward_kinematics(q), forward_kinematics(q2)
    assert np.allclose(T1[:3, 3] - T0[:3, 3], [0.03, -0.02, 0.01], atol=1e-4)
    assert np.allclose(matrix_to_rotvec(T1[:3, :3] @ T0[:3, :3].T), [0, 0, 0.2], atol=1e-4)


@pytest.fixture(scope="module")
def sim_arm() -> FrankaArm:
    pytest.importorskip("mujoco", reason="needs the sim extra")
    arm = make_arm(ArmConfig(backend="sim"))
    arm.connect()
    yield arm
    arm.disconnect()


@pytest.mark.sim
def test_dh_kinematics_match_the_mujoco_panda(sim_arm: FrankaArm) -> None:
    """Our numpy FK and the MuJoCo model agree, so the safety workspace box means the same in
    sim."""
    rng = np.random.default_rng(1)
    backend = sim_arm.backend
    for _ in range(5):
        q = np.array(PANDA_HOME) + rng.uniform(-0.4, 0.4, size=7)
        backend.set_arm_pose(q)
        p_sim = backend.read_state().ee_pose.position
        assert np.allclose(
            forward_kinematics(q)[:3, 3], p_sim, atol=0.012
        )  # grip site vs TCP offset


@pytest.mark.sim
def test_mujoco_arm_follows_commands_in_real_time(sim_arm: FrankaArm) -> None:
    backend = sim_arm.backend
    backend.set_arm_pose(np.array(PANDA_HOME))
    backend.hold()
    start = sim_arm.state().q
    target = start + np.array([0.1, -0.1, 0.1, 0.1, 0.1, 0.1, 0.1])
    sim_arm.tick()
    sim_before, t0 = backend.data.time, time.monotonic()
    while time.monotonic() - t0 < 0.5:  # a 100 Hz driver loop, re-commanding at 10 Hz
        out = sim_arm.move_joints(target)
        assert not out.refused
        for _ in range(10):
            time.sleep(0.01)
            sim_arm.tick()
    wall = time.monotonic() - t0
    assert backend.data.time - sim_before == pytest.approx(
        wall, abs=0.03
    )  # physics time == wall time
    assert np.allclose(sim_arm.state().q, target, atol=0.02)
    assert sim_arm.gripper_move(0.02)
    for _ in range(100):
        backend.step(1)
    assert sim_arm.gripper_state().width == pytest.approx(0.02, abs=0.004)


@pytest.mark.sim
def test_sim_camera_renders_the_mirrored_arm(sim_arm: FrankaArm) -> None:
    q = {"q": np.array(PANDA_HOME)}
    cam = make_camera(
        CameraConfig(name="front", width=96, height=80, sim_camera="third"),
        scene=sim_arm.backend,
        pose_source=lambda: (q["q"], None),
    )
    cam.connect()
    a = cam.read().color
    assert a.shape == (80, 96, 3) and a.dtype == np.uint8 and a.std() > 5
    q["q"] = q["q"] + np.array([1.0, 0, 0, 0, 0, 0, 0])
    b = cam.read().color
    assert np.abs(a.astype(int) - b).mean() > 1.0  # the arm turned: the image changed
    assert cam.intrinsics.width == 96 and cam.intrinsics.fx > 0
    with pytest.raises(CameraError, match="nope"):
        SimCamera(CameraConfig(sim_camera="nope"), scene=sim_arm.backend).connect()


def test_real_camera_backends_fail_with_a_clear_message_without_sdk() -> None:
    for backend, module in (("realsense", "pyrealsense2"), ("zed", "pyzed")):
        if module in sys.modules:
            continue
        with pytest.raises(CameraError, match=module):
            make_camera(CameraConfig(backend=backend)).connect()
    with pytest.raises(CameraError, match="unknown backend"):
        make_camera(CameraConfig(backend="gopro"))


# ---- pylibfranka API surface -----------------------------------------------------------------
class _State:
    def __init__(self, q: list[float]) -> None:
        self.q = q
        self.dq = [0.0] * 7
        self.tau_J = [1.0] * 7
        T = np.eye(4)
        T[:3, 3] = [0.3, 0.1, 0.5]
        self.O_T_EE = T.T.reshape(-1).tolist()  # column-major like libfranka
        self.F_T_EE = F_T_HAND_TCP.T.reshape(-1).tolist()  # Desk's Franka Hand
        self.robot_mode = 2
        self.current_errors = types.SimpleNamespace(
            joint_position_limits_violation=False, cartesian_reflex=False
        )


def _fake_pylibfranka(fail_after: int | None = None) -> types.ModuleType:
    fr = types.ModuleType("pylibfranka")
    fr.written = []

    class ControlException(Exception):
        pass

    class Ctrl:
        def __init__(self, robot) -> None:
            self.robot, self.n = robot, 0

        def readOnce(self):
            self.n += 1
            if self.robot.reflex_pending and self.n > fail_after:  # one reflex, as a real collision
                self.robot.reflex_pending = False
                self.robot.state.current_errors.cartesian_reflex = True
                raise ControlException("cartesian_reflex")
            time.sleep(0.0005)
            return self.robot.state, types.SimpleNamespace(to_sec=lambda: 0.001)

        def writeOnce(self, cmd):
            fr.written.append(cmd.q)
            self.robot.state.q = list(cmd.q)

    class Robot:
        def __init__(self, ip):
            self.ip, self.state, self.calls = ip, _State(list(PANDA_HOME)), []
            self.reflex_pending = (
                fail_after is not None
            )  # the control session after recovery runs on

        def read_once(self):
            return self.state

        def set_collision_behavior(self, *a):
            self.calls.append(("collision", a))

        def set_joint_impedance(self, k):
            self.calls.append(("impedance", k))

        def start_joint_position_control(self, mode):
            self.calls.append(("start", mode))
            return Ctrl(self)

        def automatic_error_recovery(self):
            self.calls.append(("recover",))
            self.state.current_errors.cartesian_reflex = False

        def stop(self):
            self.calls.append(("stop",))

    class Gripper:
        def __init__(self, ip):
            self.width, self.reads = 0.08, 0
            fr.gripper = self

        def read_once(self):
            self.reads += 1
            return types.SimpleNamespace(width=self.width, max_width=0.08, is_grasped=False)

        def move(self, width, speed):
            self.width = width
            return True

        def grasp(self, width, speed, force, ei, eo):
            self.width = width
            return True

        def homing(self):
            self.width = 0.08
            return True

        def stop(self):
            return True

    fr.Robot, fr.Gripper, fr.ControlException = Robot, Gripper, ControlException
    fr.JointPositions = lambda q: types.SimpleNamespace(q=q)
    fr.ControllerMode = types.SimpleNamespace(JointImpedance="JointImpedance")
    return fr


def test_libfranka_pose_and_error_helpers() -> None:
    """The reported pose is the grip site: O_T_EE (here the hand TCP at [0.3, 0.1, 0.5], axes
    of the base) moved 6.9 mm back along its z and turned -90 degrees about it."""
    pose = grip_site_pose(_State(list(PANDA_HOME)))
    assert np.allclose(pose.position, [0.3, 0.1, 0.5 - 0.0069])
    turn = matrix_to_rotvec(quat_xyzw_to_matrix(pose.quat_xyzw))
    assert np.allclose(turn, [0.0, 0.0, -np.pi / 2], atol=1e-3)
    assert error_names(types.SimpleNamespace(a=True, b=False, c=True)) == ("a", "c")


def test_libfranka_backend_streams_bounded_position_steps(monkeypatch) -> None:
    fr = _fake_pylibfranka()
    monkeypatch.setitem(sys.modules, "pylibfranka", fr)
    arm = FrankaArm(LibfrankaArmBackend("172.16.0.2", gripper_process=False))
    arm.connect()
    try:
        robot = arm.backend.robot
        assert ("collision", ([20.0] * 7, [40.0] * 7, [10.0] * 6, [20.0] * 6)) in robot.calls
        q0 = arm.state().q
        arm.move_joints(q0 + 0.05)
        deadline = time.monotonic() + 5.0
        while not np.allclose(arm.state().q, q0 + 0.05, atol=1e-6) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert np.allclose(arm.state().q, q0 + 0.05, atol=1e-6)
        steps = np.abs(np.diff(np.array(fr.written), axis=0))
        assert steps.max() <= arm.backend.step_max.max() + 1e-12  # never a jump in one 1 ms cycle
        assert arm.gripper_move(0.03) and arm.gripper_state().width == pytest.approx(0.03)
    finally:
        arm.disconnect()
    assert ("stop",) in robot.calls


def test_libfranka_reads_the_gripper_at_its_poll_rate_and_after_each_command(monkeypatch) -> None:
    """Gripper.read_once() blocks (GIL held) until the hand's next status: a state read per
    driver tick must not cost one; a gripper command is seen at the next read."""
    fr = _fake_pylibfranka()
    monkeypatch.setitem(sys.modules, "pylibfranka", fr)
    arm = FrankaArm(LibfrankaArmBackend("172.16.0.2", gripper_poll_s=60.0, gripper_process=False))
    arm.connect()
    try:
        for _ in range(50):
            arm.state()
        assert fr.gripper.reads == 1
        assert arm.gripper_move(0.03) and arm.state().gripper.width == pytest.approx(0.03)
        assert fr.gripper.reads == 2
    finally:
        arm.disconnect()


def test_libfranka_reflex_reports_error_and_recovers(monkeypatch) -> None:
    fr = _fake_pylibfranka(fail_after=5)
    monkeypatch.setitem(sys.modules, "pylibfranka", fr)
    arm = FrankaArm(LibfrankaArmBackend("172.16.0.2", gripper_process=False))
    arm.connect()
    arm.backend._thread.join(timeout=2)
    st = arm.state()
    assert st.mode == RobotMode.REFLEX and st.errors == ("cartesian_reflex",)
    assert arm.move_joints(st.q + 0.01).refused
    assert arm.recover()
    assert ("recover",) in arm.backend.robot.calls and arm.state().errors == ()
    arm.disconnect()


def test_libfranka_backend_without_sdk_or_ip_fails_clearly(monkeypatch) -> None:
    with pytest.raises(DriverError, match="IP"):
        LibfrankaArmBackend("")
    monkeypatch.setitem(sys.modules, "pylibfranka", None)
    with pytest.raises(DriverError, match="pylibfranka"):
        LibfrankaArmBackend("1.2.3.4").connect()


def test_dual_arm_layout_and_prefixes() -> None:
    left = FrankaArm(KinematicArmBackend(), joint_prefix="left_panda_", name="left")
    right = FrankaArm(KinematicArmBackend(), joint_prefix="right_panda_", name="right")
    pair = DualArm(left, right)
    pair.connect()
    assert pair.dof == 16
    assert pair.names[:8] == [f"left_panda_joint{i}" for i in range(1, 8)] + ["left_gripper"]
    assert pair.names[8:] == [f"right_panda_joint{i}" for i in range(1, 8)] + ["right_gripper"]
    vec = pair.state_vector()
    assert np.allclose(vec[:7], PANDA_HOME) and vec[7] == pytest.approx(0.08)
    cmd = vec.copy()
    cmd[8] += 0.05
    cmd[15] = 0.02
    t = time.monotonic()
    pair.tick(t)
    outs = pair.move_joints(cmd)
    assert not outs["left"].refused and not outs["right"].refused
    pair.tick(t + 0.5)
    after = pair.state_vector()
    assert after[8] == pytest.approx(cmd[8]) and after[15] == pytest.approx(0.03)  # gripper 0.1 m/s
    assert np.allclose(after[:8], vec[:8])
    pair.estop("both")
    assert all(o.refused for o in pair.move_joints(cmd).values())
    with pytest.raises(ValueError, match="16 entries"):
        pair.move_joints(np.zeros(14))
    with pytest.raises(ValueError, match="joint_prefix"):
        DualArm(FrankaArm(KinematicArmBackend()), FrankaArm(KinematicArmBackend()))
