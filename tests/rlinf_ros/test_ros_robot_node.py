"""Robot node over real DDS: e-stop / reset / recovery and gripper services (std_srvs/Trigger),
JointTrajectory and PoseStamped targets, published state."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import Probe, Procs, kinematic_dual_arm

from robot_drivers.types import PANDA_HOME

pytestmark = [pytest.mark.ros]

NAMES = [f"panda_joint{i}" for i in range(1, 8)]


def _last(samples: list) -> object:
    return samples[-1][1]


def test_estop_services_trajectory_and_pose_targets(tmp_path: Path, ros_domain_id: int) -> None:
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from rlinf_ros.conversions import pose_from_msg, trajectory_msg

    # on simulated time (the node's /clock): the 300 ms watchdog counts driver ticks, so a starved
    # process cannot see a 0.2 s trajectory go stale before its first tick
    cfg = {
        "use_sim_time": True,
        "robot": {
            "sim_clock": True,
            "arms": [{"name": "panda", "backend": "kinematic", "command_period_s": 0.01}],
        },
    }
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(cfg))
    procs = Procs(tmp_path)
    probe = None
    try:
        procs.start_node("robot", path)
        probe = Probe()
        joints = probe.record(JointState, "joint_states", lambda m: np.array(m.position))
        grip = probe.record(JointState, "franka_gripper/joint_states", lambda m: 2 * m.position[0])
        state = probe.record(
            String, "franka_robot_state_broadcaster/robot_state", lambda m: json.loads(m.data)
        )
        pose = probe.record(
            PoseStamped, "franka_robot_state_broadcaster/current_pose", pose_from_msg
        )
        traj_pub = probe.node.create_publisher(
            JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10
        )
        pose_pub = probe.node.create_publisher(
            PoseStamped, "cartesian_impedance_controller/target_pose", 10
        )
        probe.wait_for(
            lambda: joints and state and pose and traj_pub.get_subscription_count() > 0,
            60,
            "robot node up",
            procs,
        )
        q0 = _last(joints)
        assert np.allclose(q0, PANDA_HOME, atol=1e-6)

        # e-stop latches: a trajectory is refused, the arm stays (checked once the node has
        # refused it -- its estop_refused counter -- not after a fixed sleep)
        def refused() -> int:
            return _last(state)["arms"]["panda"]["safety"].get("estop_refused", 0)

        assert probe.call_trigger("estop")[0]
        traj_pub.publish(trajectory_msg(NAMES, (q0 + 0.1)[None], np.array([0.2]), stamp=0.0))
        probe.wait_for(
            lambda: _last(state)["arms"]["panda"]["estop"] and refused() > 0,
            30,
            "estop state",
            procs,
        )
        assert np.allclose(_last(joints), q0, atol=1e-6)
        assert probe.call_trigger("error_recovery")[0]  # recovery does not release the latch
        n_refused = refused()
        traj_pub.publish(trajectory_msg(NAMES, (q0 + 0.1)[None], np.array([0.2]), stamp=0.0))
        probe.wait_for(
            lambda: refused() > n_refused, 30, "the trajectory refused after recovery", procs
        )
        assert np.allclose(_last(joints), q0, atol=1e-6)

        # reset: the same command now moves the arm (arm and gripper in one message)
        assert probe.call_trigger("reset_estop")[0]
        traj_pub.publish(
            trajectory_msg(
                NAMES + ["panda_finger_joint1"],
                np.append(q0 + 0.1, 0.01)[None],
                np.array([0.2]),
                stamp=0.0,
            )
        )
        probe.wait_for(
            lambda: np.allclose(_last(joints), q0 + 0.1, atol=1e-3), 30, "arm reaches target", procs
        )
        probe.wait_for(lambda: abs(_last(grip) - 0.02) < 1e-3, 30, "gripper at 2 cm", procs)
        assert probe.call_trigger("franka_gripper/homing")[0]
        probe.wait_for(lambda: abs(_last(grip) - 0.08) < 1e-3, 30, "gripper homed (open)", procs)

        # a Cartesian target: the end effector goes there (IK in the node, safety applied)
        start = _last(pose)
        target = PoseStamped()
        target.header.frame_id = "base"
        p = start.position + np.array([0.03, -0.02, 0.0])
        target.pose.position.x, target.pose.position.y, target.pose.position.z = (
            float(v) for v in p
        )
        o = target.pose.orientation
        o.x, o.y, o.z, o.w = (float(v) for v in start.quat_xyzw)
        pose_pub.publish(target)
        probe.wait_for(
            lambda: np.linalg.norm(_last(pose).position - p) < 2e-3,
            30,
            "EE at the target pose",
            procs,
        )
        assert not _last(state)["arms"]["panda"]["estop"]
    finally:
        if probe is not None:
            probe.close()
        codes = procs.stop_all()
    assert codes["robot"] == 0


def test_dual_arm_robot_node_names_and_routes_commands_per_arm(
    tmp_path: Path, ros_domain_id: int
) -> None:
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from rlinf_ros.conversions import trajectory_msg

    procs = Procs(tmp_path)
    probe = None
    try:
        procs.start_node("robot", kinematic_dual_arm(tmp_path, sim_clock=True))
        probe = Probe()
        joints = probe.record(
            JointState, "joint_states", lambda m: (list(m.name), np.array(m.position))
        )
        grip = probe.record(JointState, "franka_gripper/joint_states", lambda m: list(m.name))
        pub = probe.node.create_publisher(
            JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10
        )
        probe.wait_for(
            lambda: joints and grip and pub.get_subscription_count() > 0, 60, "dual robot up", procs
        )
        names, q0 = _last(joints)
        assert names == [f"left_panda_joint{i}" for i in range(1, 8)] + [
            f"right_panda_joint{i}" for i in range(1, 8)
        ]
        assert _last(grip) == [
            "left_panda_finger_joint1",
            "left_panda_finger_joint2",
            "right_panda_finger_joint1",
            "right_panda_finger_joint2",
        ]
        right = names[7:]
        pub.publish(trajectory_msg(right, (q0[7:] + 0.05)[None], np.array([0.2]), stamp=0.0))
        probe.wait_for(
            lambda: np.allclose(_last(joints)[1][7:], q0[7:] + 0.05, atol=1e-3),
            60,
            "right arm moved",
            procs,
        )
        assert np.allclose(_last(joints)[1][:7], q0[:7], atol=1e-6)  # the left arm did not
        assert probe.call_trigger("right/franka_gripper/homing")[0]
        assert probe.call_trigger("left/franka_gripper/open")[0]
    finally:
        if probe is not None:
            probe.close()
        procs.stop_all()
