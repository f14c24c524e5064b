"""Commands, poses and states carry real header stamps (the time of publication), never zero."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the robot extra (ros-kilted-* wheels)")

from rlinf_ros.conversions import (
    camera_info_msg,
    joint_state_msg,
    numpy_to_image,
    pose_msg,
    stamp_to_sec,
    trajectory_from_msg,
    trajectory_msg,
)
from robot_drivers.cameras import CameraIntrinsics
from robot_drivers.types import EEPose


def test_builders_stamp_now_unless_given_a_stamp() -> None:
    t0 = time.time()
    msgs = [
        trajectory_msg(["a"], np.zeros((1, 1)), np.array([0.1])),
        pose_msg(EEPose(np.zeros(3), np.eye(4)[3])),
        joint_state_msg(["a"], np.zeros(1)),
        numpy_to_image(np.zeros((2, 2, 3), np.uint8)),
        camera_info_msg(CameraIntrinsics.from_fovy(4, 3, 45.0)),
    ]
    for msg in msgs:
        assert t0 <= stamp_to_sec(msg.header.stamp) <= time.time() + 1e-3, type(msg).__name__
    assert (
        stamp_to_sec(
            trajectory_msg(["a"], np.zeros((1, 1)), np.array([0.1]), stamp=0.0).header.stamp
        )
        == 0.0
    )
    assert (
        stamp_to_sec(pose_msg(EEPose(np.zeros(3), np.eye(4)[3]), stamp=12.5).header.stamp) == 12.5
    )


def test_a_stamped_trajectory_starts_at_its_stamp() -> None:
    msg = trajectory_msg(["a"], np.ones((1, 1)), np.array([0.5]), stamp=1000.25)
    traj = trajectory_from_msg(msg, ["a"], now=1000.30, q_now=np.zeros(1))
    assert traj.start == pytest.approx(1000.25) and traj.end == pytest.approx(1000.75)


class _ZeroPolicy:
    def infer(self, obs: dict) -> dict:
        return {"actions": np.zeros((1, 8))}

    def close(self) -> None:
        pass


@pytest.mark.ros
def test_robot_and_policy_client_nodes_publish_stamped_messages(ros_domain_id: int) -> None:
    """Both nodes in this process on one executor: every command, pose and joint state that
    reaches a subscriber is stamped with the time it was made -- after the nodes started, not
    after it arrived (never zero, never a time to come)."""
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from rlinf_ros.config import PolicyClientConfig, RobotNodeConfig
    from rlinf_ros.nodes.policy_client import PolicyClientNode
    from rlinf_ros.nodes.robot import RobotNode
    from robot_drivers.factory import ArmConfig

    rclpy.init()
    executor = SingleThreadedExecutor()
    nodes: list = []
    try:
        robot = RobotNode(
            RobotNodeConfig(
                arms=[ArmConfig(name="panda", backend="kinematic", command_period_s=0.01)]
            )
        )
        client = PolicyClientNode(
            PolicyClientConfig(cameras={}, control_hz=10.0), connect=_ZeroPolicy
        )
        probe = rclpy.create_node("stamp_probe")
        nodes = [robot, client, probe]
        got: dict[str, list[tuple[float, float]]] = {"commands": [], "poses": [], "joints": []}
        for key, msg_type, topic in [
            ("commands", JointTrajectory, robot.cfg.topics.joint_trajectory),
            ("poses", PoseStamped, robot.cfg.topics.ee_pose),
            ("joints", JointState, robot.cfg.topics.joint_states),
        ]:
            probe.create_subscription(
                msg_type,
                topic,
                lambda m, k=key: got[k].append((time.time(), stamp_to_sec(m.header.stamp))),
                10,
            )
        for node in nodes:
            executor.add_node(node)
        t_start = time.time()
        deadline = time.time() + 60
        while time.time() < deadline and min(len(v) for v in got.values()) < 5:
            executor.spin_once(timeout_sec=0.05)
        for key, samples in got.items():
            assert len(samples) >= 5, f"only {len(samples)} {key} arrived"
            assert all(t_start <= stamp <= arrived for arrived, stamp in samples), (
                f"{key} stamps are not the time of publication: "
                f"{[(s, a) for a, s in samples[:5]]}, start {t_start}"
            )
    finally:
        for node in nodes:
            getattr(node, "close", lambda: None)()
            executor.remove_node(node)
            node.destroy_node()
        executor.shutdown()
        rclpy.try_shutdown()
