"""The end-effector frame a policy sees: the MuJoCo twin's grip site, on the libfranka backend too.

Why: a policy trained in simulation reads ``ee_pos`` / ``ee_rot6d`` of the grip site
(``gripper0_grip_site``); libfranka reports ``O_T_EE``, the Franka Hand's TCP, 6.9 mm further
out and turned 90 degrees about z. Measured on franky-sim before the conversion: the demo reach
checkpoint reached 0 of 5 goals, its wrist rotations fighting an orientation it had never seen.
``robot_drivers.kinematics`` holds the conversion (through the flange, with the robot's own
``F_T_EE``); these tests pin its numbers to the compiled MuJoCo scene, and check that the
kinematic and bridge backends report the same frame (a bridged stack's pose comes in its own
frame, its Cartesian targets go out in it).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.rotations import (
    matrix_to_quat_xyzw,
    matrix_to_rotvec,
    quat_xyzw_to_matrix,
    rotvec_to_matrix,
)
from robot_drivers.arm import FrankaArm
from robot_drivers.bridge_arm import BridgeArmBackend
from robot_drivers.factory import ArmConfig, make_arm
from robot_drivers.kinematics import (
    EE_FRAMES,
    F_T_GRIP_SITE,
    F_T_HAND_TCP,
    forward_kinematics,
    grip_site_fk,
    grip_site_from_o_t_ee,
    o_t_ee_from_grip_site,
    solve_ik,
)
from robot_drivers.libfranka_arm import grip_site_pose
from robot_drivers.sim_arm import KinematicArmBackend
from robot_drivers.types import PANDA_HOME, EEPose

# the reach spec's home (robosuite's Panda home, the demo policy's start)
REACH_HOME = np.array([0.0, np.pi / 16, 0.0, -np.pi / 2 - np.pi / 3, 0.0, np.pi - 0.2, np.pi / 4])


def random_pose(rng: np.random.Generator) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = rotvec_to_matrix(rng.normal(size=3))
    T[:3, 3] = rng.uniform(-0.5, 0.5, size=3)
    return T


@pytest.mark.sim
def test_grip_site_of_o_t_ee_is_the_mujoco_twins_grip_site() -> None:
    """At the same joints, the pose the libfranka backend derives from ``O_T_EE`` (numpy FK of
    the hand TCP, as libfranka computes it) is the sim backend's grip site, to numerical
    precision; the raw TCP is 6.9 mm and 90 degrees off."""
    pytest.importorskip("mujoco", reason="needs the sim extra")
    from robot_drivers.sim_arm import MujocoArmBackend

    twin = MujocoArmBackend()
    twin.connect()
    rng = np.random.default_rng(0)
    for q in [REACH_HOME, np.array(PANDA_HOME), *(REACH_HOME + rng.normal(0, 0.4, (4, 7)))]:
        twin.set_arm_pose(q)
        pose = twin.read_state().ee_pose
        site = np.eye(4)
        site[:3, :3] = quat_xyzw_to_matrix(pose.quat_xyzw)
        site[:3, 3] = pose.position
        tcp = forward_kinematics(q)
        assert np.allclose(grip_site_from_o_t_ee(tcp), site, atol=1e-9)
        assert np.linalg.norm(tcp[:3, 3] - site[:3, 3]) == pytest.approx(0.0069, abs=1e-4)
        turn = matrix_to_rotvec(tcp[:3, :3].T @ site[:3, :3])
        assert np.allclose(turn, [0.0, 0.0, -np.pi / 2], atol=1e-3)


def test_the_grip_site_does_not_depend_on_the_end_effector_set_in_desk() -> None:
    """The same flange pose with two ``F_T_EE`` settings (Desk's hand, or none) gives one grip
    site; and ``o_t_ee_from_grip_site`` inverts the conversion (impedance targets)."""
    rng = np.random.default_rng(1)
    for _ in range(5):
        o_t_f = random_pose(rng)
        for f_t_ee in (F_T_HAND_TCP, np.eye(4), random_pose(rng)):
            o_t_ee = o_t_f @ f_t_ee
            site = grip_site_from_o_t_ee(o_t_ee, f_t_ee)
            assert np.allclose(site, o_t_f @ F_T_GRIP_SITE, atol=1e-12)
            assert np.allclose(o_t_ee_from_grip_site(site, f_t_ee), o_t_ee, atol=1e-12)


def matrix(pose: EEPose) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = quat_xyzw_to_matrix(pose.quat_xyzw), pose.position
    return T


def ee_pose(T: np.ndarray) -> EEPose:
    return EEPose(T[:3, 3].copy(), matrix_to_quat_xyzw(T[:3, :3]))


def libfranka_reading(o_t_ee: np.ndarray, f_t_ee: np.ndarray) -> np.ndarray:
    """The pose the libfranka backend reports for a ``RobotState`` with these two frames (its
    column-major 16-vectors)."""
    state = SimpleNamespace(O_T_EE=o_t_ee.T.ravel(), F_T_EE=f_t_ee.T.ravel())
    return matrix(grip_site_pose(state))


def bridge(frame: str, sent: list[EEPose] | None = None) -> BridgeArmBackend:
    """A bridged Panda whose stand-in controller reports and takes poses in ``frame``: each safe
    joint target goes out as the robot node's bridge I/O sends it to a Cartesian controller."""
    arm = BridgeArmBackend([f"fr3_joint{i}" for i in range(1, 8)], ee_frame=frame, clock=lambda: 0)
    if sent is not None:
        arm.send_joints = lambda q: sent.append(arm.controller_pose(q))
    return arm


def joint_samples() -> list[np.ndarray]:
    rng = np.random.default_rng(2)
    return [REACH_HOME, np.array(PANDA_HOME), *(REACH_HOME + rng.normal(0, 0.4, (4, 7)))]


@pytest.mark.sim
def test_kinematic_and_bridge_backends_report_the_mujoco_twins_grip_site() -> None:
    """At the same joints, the kinematic backend, and a bridged arm reading the hand's TCP from
    its stack (franka_ros2's ``current_pose``) or from its own kinematics, all report the MuJoCo
    twin's grip site."""
    pytest.importorskip("mujoco", reason="needs the sim extra")
    from robot_drivers.sim_arm import MujocoArmBackend

    twin = MujocoArmBackend()
    twin.connect()
    for q in joint_samples():
        twin.set_arm_pose(q)
        site = matrix(twin.read_state().ee_pose)
        kinematic = KinematicArmBackend(home=tuple(q))
        assert np.allclose(matrix(kinematic.read_state().ee_pose), site, atol=1e-9)
        fk, stack = bridge("hand_tcp"), bridge("hand_tcp")
        for arm in (fk, stack):
            arm.update_joints(q, np.zeros(7), np.zeros(7), stamp=0.0)
        stack.update_pose(ee_pose(forward_kinematics(q)), stamp=0.0)
        assert (fk.ee_pose_source, stack.ee_pose_source) == ("fk", "stack")
        assert np.allclose(matrix(fk.read_state().ee_pose), site, atol=1e-9)
        assert np.allclose(matrix(stack.read_state().ee_pose), site, atol=1e-9)


def test_kinematic_backend_reports_what_the_libfranka_backend_reports() -> None:
    """The kinematic arm's pose is the libfranka backend's reading of a robot at the same joints
    (``O_T_EE`` the hand's TCP, Desk's Franka Hand), not the TCP itself."""
    for q in joint_samples():
        got = matrix(KinematicArmBackend(home=tuple(q)).read_state().ee_pose)
        assert np.allclose(got, libfranka_reading(forward_kinematics(q), F_T_HAND_TCP), atol=1e-9)
        assert np.linalg.norm(got[:3, 3] - forward_kinematics(q)[:3, 3]) > 0.006


@pytest.mark.parametrize("frame", sorted(EE_FRAMES))
def test_bridge_converts_the_stacks_frame_to_the_grip_site_and_back(frame: str) -> None:
    """A stand-in controller reporting its pose in ``frame`` (the hand's TCP as franka_ros2
    ships, the flange, or the grip site itself): the bridge reports the grip site, as the
    libfranka backend does with ``F_T_EE`` = that frame; a safe joint target goes out as that
    frame's pose there, which the controller reports back as the grip site of the target."""
    f_t_ee = EE_FRAMES[frame]
    for q in joint_samples():
        o_t_flange = forward_kinematics(q) @ np.linalg.inv(F_T_HAND_TCP)
        reported = o_t_flange @ f_t_ee
        arm = bridge(frame)
        arm.update_joints(q, np.zeros(7), np.zeros(7), stamp=0.0)
        arm.update_pose(ee_pose(reported), stamp=0.0)
        got = matrix(arm.read_state().ee_pose)
        assert np.allclose(got, libfranka_reading(reported, f_t_ee), atol=1e-9)
        assert np.allclose(got, grip_site_fk(q), atol=1e-9)
        out = matrix(arm.controller_pose(q))
        assert np.allclose(out, reported, atol=1e-9)
        assert np.allclose(out, o_t_ee_from_grip_site(got, f_t_ee), atol=1e-9)


def test_a_grip_site_target_reaches_a_bridged_controller_in_its_frame() -> None:
    """Round trip through :class:`FrankaArm`: a grip-site goal, turned into joints as the robot
    node does (IK of the hand TCP the goal puts there), leaves the bridge as the hand TCP's pose
    (franka_ros2's default frame); once the stand-in controller is there and reports that pose,
    the arm reports the goal."""
    sent: list[EEPose] = []
    backend = bridge("hand_tcp", sent)
    q0 = REACH_HOME
    backend.update_joints(q0, np.zeros(7), np.zeros(7), stamp=0.0)
    arm = FrankaArm(backend, clock=lambda: 0.0)
    goal = grip_site_fk(q0)
    goal[:3, 3] += [0.02, -0.01, 0.015]
    q1 = solve_ik(q0, o_t_ee_from_grip_site(goal), iters=50)
    out = arm.move_joints(q1)
    assert not out.refused and not out.events, out
    assert np.allclose(matrix(sent[-1]), o_t_ee_from_grip_site(goal), atol=1e-5)  # IK: ~2 um
    assert np.linalg.norm(sent[-1].position - goal[:3, 3]) > 0.006  # the TCP, not the site
    backend.update_joints(q1, np.zeros(7), np.zeros(7), stamp=0.0)
    backend.update_pose(sent[-1], stamp=0.0)
    assert np.allclose(matrix(arm.state().ee_pose), goal, atol=1e-5)


def test_an_unknown_stack_frame_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"robot.arms\[fr3\].stack_ee_frame.*hand_tcp"):
        make_arm(ArmConfig(name="fr3", backend="bridge", stack_ee_frame="tcp"))
    arm = make_arm(ArmConfig(name="fr3", backend="bridge", stack_ee_frame="flange"))
    assert arm.backend.ee_frame == "flange"  # type: ignore[attr-defined]  # a bridged arm
