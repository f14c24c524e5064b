"""RosRobotEnv when the robot does not answer: each wait ends with the documented TimeoutError.

The robot is a double in this process (its own rclpy context, over real DDS): it can subscribe
without publishing, publish an arm stuck away from home, follow commands, or fall silent mid-
episode. The assertions are on behaviour -- which error, naming what -- not on seconds: the
deadlines run on the env's own clock, and the waits for DDS discovery poll with generous limits.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import Probe

from rlinf_contracts.config import from_dict
from rlinf_ros.config import RosGraphConfig
from rlinf_ros.conversions import joint_state_msg
from robot_drivers.types import PANDA_HOME

pytestmark = pytest.mark.ros
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
DISCOVERY_S = 60.0  # DDS matching on two loaded cores: poll, with room to spare


class RobotDouble:
    """joint_states at 50 Hz (while ``publishing``) of an arm at ``q``; with ``follow`` it jumps to
    each commanded point, else it stays put (an arm that never gets home)."""

    def __init__(self, q: np.ndarray, follow: bool, publishing: bool = True) -> None:
        from rclpy.qos import QoSProfile
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        self.q, self.follow, self.publishing = np.asarray(q, np.float64).copy(), follow, publishing
        self.lock = threading.Lock()
        self.probe = Probe("robot_double")
        node = self.probe.node
        self.pub = node.create_publisher(JointState, "joint_states", QoSProfile(depth=10))
        self.sub = node.create_subscription(
            JointTrajectory,
            "joint_trajectory_controller/joint_trajectory",
            self._on_command,
            QoSProfile(depth=10),
        )
        node.create_timer(0.02, self._tick)

    def _on_command(self, msg: Any) -> None:
        if self.follow and msg.points:
            point = dict(zip(msg.joint_names, msg.points[-1].positions))
            with self.lock:
                self.q = np.array([point.get(n, q) for n, q in zip(JOINTS, self.q)])

    def _tick(self) -> None:
        if self.publishing:
            with self.lock:
                q = self.q.copy()
            self.pub.publish(joint_state_msg(JOINTS, q, np.zeros(7)))

    def close(self) -> None:
        self.probe.close()


def _env(home_timeout_s: float, step_timeout_s: float):
    from rlinf_ros.ros_robot_env import RosRobotEnv

    cfg = from_dict(
        RosGraphConfig,
        {
            "policy_client": {"cameras": {}, "control_hz": 10},
            "env": {
                "home_timeout_s": home_timeout_s,
                "step_timeout_s": step_timeout_s,
                "max_episode_steps": 50,
            },
        },
    )
    return RosRobotEnv(cfg)


def _poll(cond, what: str) -> None:
    import time

    deadline = time.monotonic() + DISCOVERY_S
    while not cond():
        assert time.monotonic() < deadline, f"{what} within {DISCOVERY_S} s"
        time.sleep(0.05)


def test_reset_with_no_robot_on_the_command_topic_says_so(ros_domain_id: int) -> None:
    env = _env(home_timeout_s=0.5, step_timeout_s=0.5)
    try:
        with pytest.raises(
            TimeoutError,
            match=r"RosRobotEnv\.reset: nobody subscribes to "
            r"joint_trajectory_controller/joint_trajectory after 0\.5 s",
        ):
            env.reset()
    finally:
        env.close()


def test_reset_without_observations_ends_at_the_reset_deadline(ros_domain_id: int) -> None:
    robot = RobotDouble(
        PANDA_HOME, follow=True, publishing=False
    )  # listens, never reports its joints
    # a step timeout far beyond the reset's: the reset keeps its own deadline, not 5 step timeouts
    env = _env(home_timeout_s=1.0, step_timeout_s=10.0)
    try:
        _poll(
            lambda: env._pub.get_subscription_count() > 0,
            "the robot double subscribes to the commands",
        )
        with pytest.raises(
            TimeoutError,
            match=r"RosRobotEnv\.reset \(env\.home_timeout_s 1\.0 s\): no synchronised "
            r"observation on joint_states \+ \(no cameras\) within",
        ):
            env.reset()
    finally:
        env.close()
        robot.close()


def test_reset_that_never_gets_home_names_the_joint_error(ros_domain_id: int) -> None:
    robot = RobotDouble(np.zeros(7), follow=False)  # stuck far from home (an e-stopped arm)
    env = _env(home_timeout_s=5.0, step_timeout_s=5.0)
    try:
        _poll(
            lambda: (
                env._pub.get_subscription_count() > 0 and robot.pub.get_subscription_count() > 0
            ),
            "the robot double and the env discover each other",
        )
        with pytest.raises(
            TimeoutError,
            match=r"RosRobotEnv\.reset: arm not home after env\.home_timeout_s 5\.0 s "
            r"\(max joint error 2\.\d+ rad\); check e-stop",
        ):
            env.reset()
    finally:
        env.close()
        robot.close()


def test_a_robot_lost_mid_episode_ends_the_step_with_a_timeout(ros_domain_id: int) -> None:
    robot = RobotDouble(np.asarray(PANDA_HOME) + 0.1, follow=True)
    env = _env(home_timeout_s=DISCOVERY_S, step_timeout_s=3.0)
    try:
        _poll(
            lambda: robot.pub.get_subscription_count() > 0, "the env subscribes to the joint states"
        )
        obs = env.reset()
        assert np.allclose(obs["state"][0, :7], PANDA_HOME, atol=0.02)
        action = np.zeros((1, 8), np.float32)
        obs, *_ = env.step(action)  # the robot answers: an episode is under way
        robot.publishing = False  # ... and is lost (a crashed driver, a pulled cable)
        with pytest.raises(
            TimeoutError,
            match=r"RosRobotEnv\.step \(robot lost\?\): no synchronised observation "
            r"on joint_states \+ \(no cameras\) within 3\.1 s",
        ):
            env.step(action)
    finally:
        env.close()
        robot.close()
