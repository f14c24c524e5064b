"""Over real rclpy: the teleop node with the scripted human in drift mode (HG-DAgger) watches the
end-effector pose and the goal on their topics and raises the intervention flag on
``teleop/command`` when the hand heads away from the goal, lowering it once back on track.

Each phase holds a pose until the node has read it and then collects the commands stamped after
that moment (the node clock the commands carry): what is checked is what the node computed from
that pose, however the machine schedules the spin."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import ROOT

pytestmark = pytest.mark.ros


def test_teleop_node_takes_over_when_the_hand_heads_away(ros_domain_id: int) -> None:
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String

    from rlinf_contracts.transitions import TeleopCommand
    from rlinf_ros.config import load_graph_config
    from rlinf_ros.conversions import pose_msg
    from rlinf_ros.nodes.common import now_s, reliable_qos, sensor_qos
    from rlinf_ros.nodes.teleop import TeleopNode
    from robot_drivers.types import EEPose

    cfg = load_graph_config(
        ROOT / "configs/ros_sim_franka.yaml",
        [
            "teleop.enabled=true",
            "teleop.device=scripted",
            "teleop.always_intervene=false",
            "teleop.rate_hz=50",
            "teleop.script={patience_s: 30.0, progress_m: 0.02, release_m: 0.02, regress_m: 0.03}",
        ],
    )
    pc = cfg.policy_client
    got: list[tuple[float, TeleopCommand]] = []
    rclpy.init()
    try:
        node = TeleopNode(cfg.teleop, cfg)
        probe = rclpy.create_node("drift_probe")
        pub_pose = probe.create_publisher(PoseStamped, pc.ee_pose_topics[0], sensor_qos())
        pub_goal = probe.create_publisher(PoseStamped, pc.goal_topic, reliable_qos(1))
        probe.create_subscription(
            String,
            cfg.teleop.command_topic,
            lambda m: got.append((time.monotonic(), TeleopCommand.from_json(m.data))),
            reliable_qos(50),
        )
        ex = SingleThreadedExecutor()
        ex.add_node(node)
        ex.add_node(probe)
        quat = np.r_[0, 0, 0, 1.0]

        def hold(position: list[float], n: int = 5) -> list[TeleopCommand]:
            """Publish the pose (and the goal) until the node has read it, then until ``n`` commands
            stamped after that have arrived; returns those."""
            seen_at: float | None = None
            deadline = time.monotonic() + 60
            while True:
                assert time.monotonic() < deadline, f"no {n} commands from pose {position} in 60 s"
                pub_goal.publish(pose_msg(EEPose(np.array([0.5, 0.0, 0.3]), quat)))
                pub_pose.publish(pose_msg(EEPose(np.array(position), quat)))
                ex.spin_once(timeout_sec=0.02)
                dev = node.device
                if (
                    seen_at is None
                    and dev.ee is not None
                    and dev.goal is not None
                    and np.allclose(dev.ee, position)
                ):
                    seen_at = now_s(node)  # from here on, every tick computes from this pose
                after = [c for _, c in got if seen_at is not None and c.stamp > seen_at]
                if len(after) >= n:
                    return after

        on_track = hold([0.38, 0.0, 0.3])  # 0.12 m from the goal, closest so far
        away = hold([0.30, 0.0, 0.3])  # 0.20 m: 8 cm back from the closest approach
        back = hold([0.49, 0.0, 0.3])  # within release_m: hand back
        ex.shutdown()
        node.close()
        node.destroy_node()
        probe.destroy_node()
    finally:
        rclpy.try_shutdown()
    assert on_track and away and back, (len(on_track), len(away), len(back))
    assert not any(c.intervention for c in on_track)
    assert all(c.intervention for c in away)
    assert away[-1].action[0] > 0.9  # the human drives +x, toward the goal (ee_delta, normalised)
    assert not any(c.intervention for c in back)
