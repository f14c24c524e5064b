"""RosRobotEnv: a robot on ROS 2 as a ``sim_bridges`` vector env (``env: ros/franka``).

Why: the learner's env workers step any ``VectorEnv``; with this class they train on the real
(or ROS-simulated) robot through the same topics the policy client uses, no learner change.

- ``reset``: command the arms' home pose, wait until reached, return the next synchronised
  observation. The whole reset has ``home_timeout_s``: no robot subscribed to the command
  topic, no observation, or an arm not home by then is a :class:`TimeoutError` that starts
  with ``RosRobotEnv.reset`` and says which.
- ``step``: per control step (``[1, A]`` or a chunk ``[1, chunk, A]``), publish the joint
  command, keep the control rate, and wait for a synchronised observation stamped after the
  command (``step_timeout_s``, else :class:`TimeoutError` naming the topics: a lost robot).
- Deadlines run on the env's own steady clock (``clock``, :func:`time.monotonic`), never on the
  wall clock or ROS time: a wall-clock jump or a stopped ``/clock`` cannot make a wait endless.
- observations and actions follow ``policy_client.robot_spec`` (``rlinf_ros.robot_io``), the
  same state features and control law as the simulator and the policy client;
- reward / success come from a registered source (``none``, ``ee_distance`` to a goal,
  ``topic``: std_msgs/Float64 published by an external judge; with two arms ``ee_distance`` uses
  the first arm); episodes truncate at
  ``max_episode_steps`` and auto-reset as the contract says.

One robot is one env: ``num_envs`` must be 1 (run one env worker per robot).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rlinf_contracts.env import EnvSpec, Observation
from rlinf_contracts.env_registry import register_env
from rlinf_contracts.stepping import RowStep, SteppedVectorEnv
from rlinf_ros.config import RosGraphConfig, load_graph_config
from rlinf_ros.conversions import (
    ConversionError,
    image_to_rgb,
    joint_state_to_arrays,
    pose_from_msg,
    stamp_to_sec,
    trajectory_msg,
)
from rlinf_ros.robot_io import ARM_DOF, SpecIO, reading_from_pose
from rlinf_ros.sync import ApproxTimeSync

log = logging.getLogger(__name__)

# reward source: (env, ee_position) -> (reward, success)
RewardFn = Callable[["RosRobotEnv", np.ndarray | None], tuple[float, bool]]


def _reward_none(env: RosRobotEnv, ee: np.ndarray | None) -> tuple[float, bool]:
    return 0.0, False


def _reward_ee_distance(env: RosRobotEnv, ee: np.ndarray | None) -> tuple[float, bool]:
    if ee is None:
        return 0.0, False
    d = float(np.linalg.norm(ee - np.asarray(env.cfg.env.goal_position)))
    return -d, d < env.cfg.env.success_radius


def _reward_topic(env: RosRobotEnv, ee: np.ndarray | None) -> tuple[float, bool]:
    r = env._external_reward
    return r, r > 0.0


REWARD_SOURCES: dict[str, RewardFn] = {
    "none": _reward_none,
    "ee_distance": _reward_ee_distance,
    "topic": _reward_topic,
}


class RosRobotEnv(SteppedVectorEnv):
    def __init__(
        self,
        cfg: RosGraphConfig,
        cameras: dict[str, tuple[int, int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:

        if cfg.env.reward not in REWARD_SOURCES:
            raise ValueError(
                f"env.reward {cfg.env.reward!r} unknown; known: {sorted(REWARD_SOURCES)}"
            )
        self.cfg = cfg
        self.clock = clock  # deadlines (steady); message stamps are compared with time.time()
        pc = cfg.policy_client
        self.pc = pc
        n_arms = len(pc.joint_prefixes)
        if cameras is None:  # sizes from the camera nodes publishing those topics
            by_topic = {c.image_topic: (c.camera.height, c.camera.width) for c in cfg.cameras}
            cameras = {name: by_topic[t] for name, t in pc.cameras.items() if t in by_topic}
        robot = pc.spec()
        if robot.camera_sizes() and robot.camera_sizes() != dict(cameras):
            raise ValueError(
                f"policy_client.robot_spec cameras {robot.camera_sizes()} differ from the camera "
                f"nodes' sizes {dict(cameras)}"
            )
        self.io = SpecIO(robot)
        super().__init__(
            EnvSpec(
                num_envs=1,
                state_dim=robot.state_dim,
                action_dim=robot.action_dim,
                cameras=dict(cameras),
                max_episode_steps=cfg.env.max_episode_steps,
                control_hz=pc.rate_hz,
                instruction=pc.instruction or robot.instruction,
                robot=robot,
            )
        )
        self.arm_joints = [
            [f"{p}joint{i}" for i in range(1, ARM_DOF + 1)] for p in pc.joint_prefixes
        ]
        self.fingers = [f"{p}finger_joint1" for p in pc.joint_prefixes]
        self.home = [np.asarray(a.home, dtype=np.float64) for a in cfg.robot.arms]
        self._grippers = [0.0] * n_arms
        self._poses: list[Any] = [None] * n_arms
        self._goal: np.ndarray | None = None
        self._ee: np.ndarray | None = None
        self._external_reward = 0.0
        self._reward_fn = REWARD_SOURCES[cfg.env.reward]
        self.sync = ApproxTimeSync(["joints", *self.spec.cameras], slop=pc.slop_s)
        self._new_obs = threading.Condition()
        self._start_ros()

    # ---- ROS plumbing -------------------------------------------------------------------
    def _start_ros(self) -> None:
        import rclpy
        from geometry_msgs.msg import PoseStamped
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import Image, JointState
        from std_msgs.msg import Float64
        from trajectory_msgs.msg import JointTrajectory

        from rlinf_ros.nodes.common import reliable_qos, sensor_qos

        self._ctx = rclpy.Context()
        rclpy.init(context=self._ctx)
        self.node = rclpy.create_node("ros_robot_env", context=self._ctx)
        n = self.node
        n.create_subscription(JointState, self.pc.joint_states_topic, self._on_joints, sensor_qos())
        n.create_subscription(
            JointState, self.pc.gripper_joint_states_topic, self._on_gripper, sensor_qos()
        )
        for cam in self.spec.cameras:
            n.create_subscription(
                Image, self.pc.cameras[cam], functools.partial(self._add, cam), sensor_qos()
            )
        for i, topic in enumerate(self.pc.ee_pose_topics[: len(self._poses)]):
            n.create_subscription(
                PoseStamped, topic, functools.partial(self._on_pose, i), sensor_qos()
            )
        n.create_subscription(
            PoseStamped,
            self.pc.goal_topic,
            lambda m: setattr(self, "_goal", pose_from_msg(m).position),
            reliable_qos(1),
        )
        n.create_subscription(
            Float64,
            self.cfg.env.reward_topic,
            lambda m: setattr(self, "_external_reward", float(m.data)),
            reliable_qos(),
        )
        self._pub = n.create_publisher(JointTrajectory, self.pc.command_topic, reliable_qos(10))
        self._executor = SingleThreadedExecutor(context=self._ctx)
        self._executor.add_node(n)
        self._stop = threading.Event()
        self._spin = threading.Thread(target=self._spin_loop, name="ros-env", daemon=True)
        self._spin.start()

    def _spin_loop(self) -> None:
        while not self._stop.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def _add(self, stream: str, msg: Any) -> None:
        self.sync.add(stream, stamp_to_sec(msg.header.stamp), msg)
        with self._new_obs:
            self._new_obs.notify_all()

    def _on_joints(self, msg: Any) -> None:
        try:
            per_arm = [joint_state_to_arrays(msg, names)[:2] for names in self.arm_joints]
        except ConversionError:
            return
        self.sync.add("joints", stamp_to_sec(msg.header.stamp), per_arm)
        with self._new_obs:
            self._new_obs.notify_all()

    def _on_gripper(self, msg: Any) -> None:
        names = list(msg.name)
        for i, f in enumerate(self.fingers):
            if f in names:
                self._grippers[i] = 2.0 * float(msg.position[names.index(f)])

    def _on_pose(self, i: int, msg: Any) -> None:
        try:
            self._poses[i] = pose_from_msg(msg)
        except ConversionError:
            return
        if i == 0:
            self._ee = self._poses[0].position

    # ---- observations -------------------------------------------------------------------
    def _wait_obs(
        self, after: float, timeout: float, during: str = "RosRobotEnv"
    ) -> tuple[Observation, list[Any]]:
        """Next synchronised set whose oldest stamp is later than ``after`` (wall clock), within
        ``timeout`` s of :attr:`clock`; ``during`` starts the error message."""
        deadline = self.clock() + timeout
        while True:
            found = self.sync.pop_newest()
            if found is not None and min(s for s, _ in found.values()) > after:
                return self._to_obs(found)
            remaining = deadline - self.clock()
            if remaining <= 0:
                cams = self.pc.cameras.values()
                cameras = list(cams) if self.spec.cameras else "(no cameras)"
                raise TimeoutError(
                    f"{during}: no synchronised observation on {self.pc.joint_states_topic} + "
                    f"{cameras} within {timeout} s (slop {self.pc.slop_s} s; last stamps "
                    f"{self.sync.latest_stamps()}); are the nodes running on this ROS_DOMAIN_ID?"
                )
            with self._new_obs:
                self._new_obs.wait(min(remaining, 0.05))

    def _to_obs(self, found: dict[str, tuple[float, Any]]) -> tuple[Observation, list[Any]]:
        readings = []
        for i, (q, dq) in enumerate(found["joints"][1]):
            pose = self._poses[i]
            readings.append(
                reading_from_pose(
                    q,
                    dq,
                    self._grippers[i],
                    None if pose is None else pose.position,
                    None if pose is None else pose.quat_xyzw,
                    goal_pos=self._goal,
                )
            )
        images = {c: image_to_rgb(found[c][1]) for c in self.spec.cameras}
        one = self.io.observation(readings, images, self.spec.instruction)
        obs = {
            "state": one["state"][None],
            "images": {c: v[None].copy() for c, v in images.items()},
            "instruction": [one["instruction"]],
        }
        return obs, readings

    def _publish(self, joints: list[np.ndarray], grippers: list[float], duration: float) -> None:
        names = [n for js in self.arm_joints for n in js] + self.fingers
        point = np.concatenate([*joints, np.asarray(grippers) / 2.0])
        self._pub.publish(trajectory_msg(names, point[None], np.array([duration])))

    # ---- VectorEnv ----------------------------------------------------------------------
    def _reset_rows(self, rows: np.ndarray) -> None:
        """Drive the arm(s) home and wait until there (the one row is this robot)."""
        e = self.cfg.env
        deadline = self.clock() + e.home_timeout_s  # one deadline for the whole reset
        self._wait_for_robot(e.home_timeout_s, "RosRobotEnv.reset")
        t0 = time.time()
        self._publish(self.home, [0.08] * len(self.home), duration=2.0)
        err: float | None = None  # max joint error of the newest observation
        while True:
            try:
                obs, readings = self._wait_obs(
                    t0,
                    max(deadline - self.clock(), 0.0),
                    f"RosRobotEnv.reset (env.home_timeout_s {e.home_timeout_s} s)",
                )
            except TimeoutError:
                if err is None:  # not a single observation: that error says which topics
                    raise
                raise TimeoutError(
                    "RosRobotEnv.reset: arm not home after env.home_timeout_s "
                    f"{e.home_timeout_s} s (max joint error {err:.3f} rad); check e-stop / "
                    "robot_state"
                ) from None
            err = max(float(np.abs(r.q - h).max()) for r, h in zip(readings, self.home))
            if err < 0.02:
                break
            self._publish(self.home, [0.08] * len(self.home), duration=0.5)  # keep the watchdog fed
        self._obs, self._readings = obs, readings
        self.io.begin_episode(readings)

    def _observe(self) -> Observation:
        return self._obs

    def _wait_for_robot(self, timeout: float, during: str = "RosRobotEnv") -> None:
        """Commands published before DDS matched the robot's subscription would be lost."""
        deadline = self.clock() + timeout
        while self._pub.get_subscription_count() == 0:
            if self.clock() > deadline:
                raise TimeoutError(
                    f"{during}: nobody subscribes to {self.pc.command_topic} after {timeout} s; "
                    "is the robot node running on this ROS_DOMAIN_ID?"
                )
            time.sleep(0.02)

    def _step_rows(self, rows: Any, actions: np.ndarray) -> RowStep:
        """Command one control step (a trajectory lasting one period) and observe its end."""
        period = 1.0 / self.spec.control_hz
        cmd = self.io.decode(actions[:1], self._readings)[0]
        t_cmd = time.time()
        self._publish(cmd.joints, cmd.grippers, period)
        self._obs, self._readings = self._wait_obs(
            t_cmd + period, self.cfg.env.step_timeout_s + period, "RosRobotEnv.step (robot lost?)"
        )
        reward, success = self._reward_fn(self, self._ee)
        return RowStep(reward=np.array([reward], np.float32), success=np.array([success]))

    def close(self) -> None:
        import rclpy

        if getattr(self, "_stop", None) is None or self._stop.is_set():
            return
        self._stop.set()
        self._spin.join(timeout=2)
        self._executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self._ctx)


@register_env("ros")
def make_ros_env(
    task: str = "franka",
    num_envs: int = 1,
    config: str = "configs/ros_sim_franka.yaml",
    overrides: list[str] | None = None,
    **_: Any,
) -> RosRobotEnv:
    """``env: ros/<task>`` -> RosRobotEnv over the graph YAML ``config`` (one robot = one env)."""
    if num_envs != 1:
        raise ValueError(
            f"env ros/{task}: one robot is one env, got num_envs={num_envs}; "
            "run one env worker per robot"
        )
    return RosRobotEnv(load_graph_config(config, overrides))
