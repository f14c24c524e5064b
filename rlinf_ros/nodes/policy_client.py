"""Policy client node: synchronised observations -> policy server -> joint commands at control rate.

Subscribes to ``joint_states``, the gripper joint states and one Image topic per camera,
matches the newest set within ``slop_s`` (:class:`rlinf_ros.sync.ApproxTimeSync`), sends the
canonical observation map over the wire (``policy_server.client.PolicyClient``) from a
background thread, and publishes one ``JointTrajectory`` point per control tick (arm joints
plus ``<prefix>finger_joint1`` for the gripper). When the server is lost it publishes *hold*
commands (last target), keeps running, and resumes when the server answers again. Status
(mode, counters, latency percentiles) goes out as JSON on ``policy_client/status``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from rlinf_ros.config import PolicyClientConfig, RosGraphConfig
from rlinf_ros.conversions import (
    ConversionError,
    arm_positions,
    image_to_rgb,
    stamp_to_sec,
    trajectory_msg,
)
from rlinf_ros.nodes.common import reliable_qos, run_node, sensor_qos
from rlinf_ros.policy_loop import ARM_DOF, Command, InferClient, InferenceWorker, PolicyLoop
from rlinf_ros.sync import ApproxTimeSync

log = logging.getLogger(__name__)


def wire_client_factory(cfg: PolicyClientConfig) -> Any:
    """Connect function for :class:`InferenceWorker`: one attempt, our worker does the retrying."""
    from policy_server.client import PolicyClient

    # our worker logs loss / return once; the client's per-attempt warnings would repeat every retry
    logging.getLogger("policy_server.client").setLevel(logging.ERROR)

    def connect() -> InferClient:
        return PolicyClient(cfg.server_url, api_key=cfg.api_key or None, timeout_s=cfg.infer_timeout_s,
                            connect_timeout_s=max(cfg.infer_timeout_s, 1.0), retries=0)

    return connect


class PolicyClientNode(Node):
    def __init__(self, cfg: PolicyClientConfig, connect: Any = None) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        self.cfg = cfg
        self.arm_joints = [[f"{p}joint{i}" for i in range(1, ARM_DOF + 1)] for p in cfg.joint_prefixes]
        self.fingers = [f"{p}finger_joint1" for p in cfg.joint_prefixes]
        self.sync = ApproxTimeSync(["joints", *cfg.cameras], slop=cfg.slop_s)
        self._grippers = [0.0] * len(cfg.joint_prefixes)
        self.create_subscription(JointState, cfg.joint_states_topic, self._on_joints, sensor_qos())
        self.create_subscription(JointState, cfg.gripper_joint_states_topic, self._on_gripper, sensor_qos())
        for cam, topic in cfg.cameras.items():
            self.create_subscription(Image, topic, lambda m, c=cam: self._on_image(c, m), sensor_qos())
        self.pub_cmd = self.create_publisher(JointTrajectory, cfg.command_topic, reliable_qos(10))
        self.pub_status = self.create_publisher(String, cfg.status_topic, reliable_qos(1))
        self.worker = InferenceWorker(connect or wire_client_factory(cfg), cfg.reconnect_s, cfg.name)
        self.loop = PolicyLoop(self.worker, cfg.action_mode, cfg.action_scale,
                               max_wait_s=cfg.max_wait_fraction / cfg.control_hz)
        self.stale_obs = 0
        self.reused_obs = 0
        self.create_timer(1.0 / cfg.control_hz, self._tick)
        self.create_timer(0.5, self._publish_status)
        log.info("policy client: %s @ %.1f Hz, cameras %s, server %s", cfg.action_mode, cfg.control_hz,
                 list(cfg.cameras), cfg.server_url)

    # ---- inputs -------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        q = arm_positions(msg, self.arm_joints)
        if q is not None:
            self.sync.add("joints", stamp_to_sec(msg.header.stamp), q)

    def _on_gripper(self, msg: JointState) -> None:
        for i, finger in enumerate(self.fingers):
            if finger in msg.name:
                self._grippers[i] = 2.0 * float(msg.position[list(msg.name).index(finger)])

    def _on_image(self, cam: str, msg: Image) -> None:
        self.sync.add(cam, stamp_to_sec(msg.header.stamp), msg)  # decoded only when used

    # ---- control ------------------------------------------------------------------------
    def _observation(self) -> tuple[dict[str, Any] | None, Command | None, float | None]:
        found = self.sync.pop_newest()
        if found is None and self.cfg.reuse_observation and self.sync.last is not None:
            found = self.sync.last  # no newer set yet (camera slower than control): act on the newest
            self.reused_obs += 1
        if found is None:
            return None, None, None
        t_obs = max(stamp for stamp, _ in found.values())
        q = found["joints"][1]
        try:
            images = {cam: image_to_rgb(found[cam][1]) for cam in self.cfg.cameras}
        except ConversionError as e:
            log.warning("image: %s", e)
            return None, None, None
        n = len(self.arm_joints)
        joints = [q[i * ARM_DOF:(i + 1) * ARM_DOF] for i in range(n)]
        state = np.concatenate([np.append(joints[i], self._grippers[i]) for i in range(n)]).astype(np.float32)
        obs = {"state": state, "images": images, "instruction": self.cfg.instruction}
        return obs, Command(joints, list(self._grippers), "measured"), t_obs

    def _tick(self) -> None:
        obs, measured, t_obs = self._observation()
        if t_obs is not None and time.time() - t_obs > self.cfg.max_obs_age_s:
            self.stale_obs += 1  # a stale set is never sent: the policy would act on the past
            log.debug("observation %.3f s old > max_obs_age_s; not sent", time.time() - t_obs)
            obs = None
        cmd = self.loop.tick(obs, measured, t_obs)
        if cmd is None:
            return
        names = [n for js in self.arm_joints for n in js] + self.fingers
        point = np.concatenate([*cmd.joints, np.asarray(cmd.grippers) / 2.0])
        self.pub_cmd.publish(trajectory_msg(names, point[None], np.array([1.0 / self.cfg.control_hz])))

    def status(self) -> dict[str, Any]:
        return {**self.loop.stats.summary(), "connected": self.worker.connected, "connects": self.worker.connects,
                "failures": self.worker.failures, "stale_obs": self.stale_obs, "reused_obs": self.reused_obs}

    def _publish_status(self) -> None:
        self.pub_status.publish(String(data=json.dumps(self.status())))

    def close(self) -> None:
        self.worker.stop()


def build(cfg: RosGraphConfig, name: str | None) -> PolicyClientNode:
    if not cfg.policy_client.enabled:
        raise ValueError("no enabled 'policy_client' section in this config; nothing to start")
    return PolicyClientNode(cfg.policy_client)


def main(argv: list[str] | None = None) -> int:
    return run_node("policy_client", build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
