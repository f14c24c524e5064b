"""ee_impedance over DDS: a policy client with an ee_impedance spec drives the robot node's
simulated arm (MuJoCo, its impedance torque path) to a Cartesian goal through target poses, and
the robot node hands back to position control when the client goes silent."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

pytestmark = [pytest.mark.ros]

POS_SCALE = 0.02
OFFSET = np.array([0.04, -0.03, -0.03])  # goal = the start pose + this (m, base frame)


class _GoalPolicy:
    """Moves the end effector toward ``goal`` with ee_impedance actions from the observed
    ``ee_pos`` (the first three state entries)."""

    def __init__(self, goal: list[np.ndarray]) -> None:
        self.goal = goal

    def infer(self, obs: dict) -> dict:
        ee = np.asarray(obs["state"], dtype=np.float64)[:3]
        if not self.goal:
            self.goal.append(ee + OFFSET)
        step = np.clip((self.goal[0] - ee) / POS_SCALE, -1.0, 1.0)
        return {"actions": np.concatenate([step, [1.0]])[None]}

    def close(self) -> None:
        pass


def test_policy_client_drives_the_sim_arm_with_impedance_targets(ros_domain_id: int) -> None:
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String

    from rlinf_ros.config import PolicyClientConfig, RobotNodeConfig
    from rlinf_ros.conversions import pose_from_msg
    from rlinf_ros.nodes.policy_client import PolicyClientNode
    from rlinf_ros.nodes.robot import RobotNode
    from robot_drivers.factory import ArmConfig
    from robot_drivers.safety import SafetyConfig

    spec = {
        "state": [["ee_pos", 3], ["gripper_width", 1]],
        "action": {"control": "ee_impedance", "dim": 4, "pos_scale": POS_SCALE},
    }
    goal: list[np.ndarray] = []
    rclpy.init()
    executor = SingleThreadedExecutor()
    nodes: list = []
    try:
        robot = RobotNode(
            RobotNodeConfig(
                arms=[
                    ArmConfig(
                        name="panda",
                        backend="sim",
                        control="ee_impedance",
                        command_period_s=0.01,
                        safety=SafetyConfig(watchdog_ms=500.0),
                    )
                ]
            )
        )
        client = PolicyClientNode(
            PolicyClientConfig(cameras={}, control_hz=10.0, robot_spec=spec),
            connect=lambda: _GoalPolicy(goal),
        )
        probe = rclpy.create_node("impedance_probe")
        nodes = [robot, client, probe]
        seen: dict[str, list] = {"pose": [], "target": [], "state": []}
        probe.create_subscription(
            PoseStamped, robot.cfg.topics.ee_pose, lambda m: seen["pose"].append(m), 10
        )
        probe.create_subscription(
            PoseStamped, robot.cfg.topics.target_pose, lambda m: seen["target"].append(m), 10
        )
        probe.create_subscription(
            String,
            robot.cfg.topics.robot_state,
            lambda m: seen["state"].append(json.loads(m.data)),
            10,
        )
        for node in nodes:
            executor.add_node(node)

        def spin_until(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.02)
                if cond():
                    return
            raise AssertionError(
                f"not within {timeout:.0f} s: {what}; last state {seen['state'][-1:]}"
            )

        def error() -> float:
            if not goal or not seen["pose"]:
                return np.inf
            return float(np.linalg.norm(pose_from_msg(seen["pose"][-1]).position - goal[0]))

        spin_until(lambda: error() < 5e-3, "the end effector at the policy's goal")
        assert robot.stats["target_poses"] > 0 and robot.stats["trajectories"] == 0
        first = pose_from_msg(seen["target"][0]).position
        assert np.linalg.norm(first - (goal[0] - OFFSET)) <= POS_SCALE * np.sqrt(3) + 1e-3
        spin_until(
            lambda: (
                bool(seen["state"]) and seen["state"][-1]["arms"]["panda"]["control"] == "torque"
            ),
            "robot_state reporting the torque loop",
        )
        executor.remove_node(client)  # the client goes silent: the watchdog holds the arm
        spin_until(
            lambda: seen["state"][-1]["arms"]["panda"]["control"] == "position",
            "the watchdog's hand-back to position control",
        )
        assert seen["state"][-1]["arms"]["panda"]["safety"].get("stale_hold", 0) >= 1
        assert error() < 1e-2
    finally:
        for node in nodes:
            getattr(node, "close", lambda: None)()
            if node in executor.get_nodes():
                executor.remove_node(node)
            node.destroy_node()
        executor.shutdown()
        rclpy.try_shutdown()
