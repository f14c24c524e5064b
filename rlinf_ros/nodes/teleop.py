"""Teleop node: a human (or a script) in the robot spec's action space, plus episode keys.

At ``rate_hz`` it reads the configured device (``rlinf_ros.teleop``: keyboard, spacemouse,
gamepad, leader, scripted), maps it with :func:`rlinf_ros.teleop.to_action` and publishes a
``TeleopCommand`` JSON on ``teleop/command``; the policy client executes it while its
``intervention`` flag is held (always, in a teleop-only graph) and labels those steps. Keys
become ``EpisodeEvent`` JSON on ``episode/event``: success / failure end the episode (and begin
the next), re-record ends it as ``aborted`` (the recorder discards it). One arm.
"""

from __future__ import annotations

import logging

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from rlinf_contracts.rotations import quat_xyzw_to_matrix
from rlinf_contracts.transitions import EpisodeEvent, TeleopCommand, event_to_json
from rlinf_ros.config import RosGraphConfig
from rlinf_ros.conversions import ConversionError, joint_state_to_arrays, pose_from_msg
from rlinf_ros.nodes.common import (
    declare_config,
    exit_process,
    now_s,
    reliable_qos,
    run_node,
    sensor_qos,
)
from rlinf_ros.online_config import TeleopNodeConfig
from rlinf_ros.teleop import make_device, to_action

log = logging.getLogger(__name__)
ENDS = {
    "success": ("complete", True),
    "failure": ("truncated", False),
    "rerecord": ("aborted", False),
}


class TeleopNode(Node):
    def __init__(self, cfg: TeleopNodeConfig, graph: RosGraphConfig) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        cfg = declare_config(self, cfg)
        self.cfg = cfg
        self.spec = graph.policy_client.spec()
        self.device = make_device(cfg.device, cfg, spec=self.spec)
        self.joints = [f"{cfg.joint_prefix}joint{i}" for i in range(1, 8)]
        self.q: np.ndarray | None = None
        self.gripper = 1.0
        pc = graph.policy_client
        self.create_subscription(JointState, pc.joint_states_topic, self._on_joints, sensor_qos())
        self.create_subscription(PoseStamped, pc.ee_pose_topics[0], self._on_pose, sensor_qos())
        self.create_subscription(PoseStamped, pc.goal_topic, self._on_goal, reliable_qos(1))
        if hasattr(self.device, "on_object"):  # a scripted pusher: the object pose the policy reads
            self.create_subscription(PoseStamped, pc.object_topic, self._on_object, sensor_qos())
        if cfg.device == "leader":
            self.create_subscription(JointState, cfg.leader_topic, self._on_leader, sensor_qos())
        self.pub_cmd = self.create_publisher(String, cfg.command_topic, reliable_qos(5))
        self.pub_event = self.create_publisher(String, cfg.event_topic, reliable_qos(10))
        self.create_timer(1.0 / cfg.rate_hz, self._tick)
        self.events = 0
        log.info(
            "teleop: %s -> %s (%s actions)", cfg.device, cfg.command_topic, self.spec.action.control
        )

    def _on_joints(self, msg: JointState) -> None:
        try:
            self.q = joint_state_to_arrays(msg, self.joints)[0]
        except ConversionError:
            pass

    def _on_pose(self, msg: PoseStamped) -> None:
        on_pose = getattr(self.device, "on_pose", None)  # a device that follows the hand
        if on_pose is not None:
            on_pose(pose_from_msg(msg).position)
        on_orientation = getattr(self.device, "on_orientation", None)  # and its tool axis
        if on_orientation is not None:
            on_orientation(quat_xyzw_to_matrix(pose_from_msg(msg).quat_xyzw))

    def _on_goal(self, msg: PoseStamped) -> None:
        on_goal = getattr(self.device, "on_goal", None)  # a device that steers to the goal
        if on_goal is not None:
            on_goal(pose_from_msg(msg).position)

    def _on_object(self, msg: PoseStamped) -> None:
        # subscribed only for a device that has on_object (the scripted push oracle)
        self.device.on_object(pose_from_msg(msg).position)  # type: ignore[attr-defined]  # see above

    def _on_leader(self, msg: JointState) -> None:
        try:
            q = joint_state_to_arrays(msg, self.joints)[0]
            self.device.on_joints(q)  # type: ignore[attr-defined]  # subscribed for a leader arm only
        except ConversionError as e:
            log.warning("leader joint states: %s", e)

    def _tick(self) -> None:
        inp = self.device.read()
        if inp.gripper is not None:
            self.gripper = float(inp.gripper)
        try:
            action = to_action(inp, self.spec, self.q, self.gripper)
        except ValueError as e:
            log.warning("teleop: %s", e)
            return
        intervene = inp.intervention or self.cfg.always_intervene
        self.pub_cmd.publish(String(data=TeleopCommand(action, intervene, now_s(self)).to_json()))
        for name in inp.events:
            status, success = ENDS[name]
            self.publish_event(
                EpisodeEvent("end", status=status, success=success, reason=name, stamp=now_s(self))
            )
            self.publish_event(EpisodeEvent("begin", stamp=now_s(self)))

    def publish_event(self, ev: EpisodeEvent) -> None:
        self.events += 1
        log.info("episode event: %s %s", ev.kind, ev.reason)
        self.pub_event.publish(String(data=event_to_json(ev)))

    def close(self) -> None:
        self.device.close()


def build(cfg: RosGraphConfig, name: str | None) -> TeleopNode:
    if not cfg.teleop.enabled:
        raise ValueError("teleop.enabled is false in this config; nothing to start")
    return TeleopNode(cfg.teleop, cfg)


def main(argv: list[str] | None = None) -> int:
    return run_node("teleop", build, argv)


if __name__ == "__main__":
    exit_process(main())
