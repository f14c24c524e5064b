"""Reward node: one ``reward`` topic (std_msgs/Float64, what ``RosRobotEnv`` with
``env.reward: topic`` reads) plus ``reward/success`` (Bool), whatever the source:

- ``source: classifier``: the newest camera frame, ``rate_hz`` times a second, to a success
  classifier served by the policy server on the GPU box (``rlinf serve --checkpoint
  runs/reward_classifier``; no torch here). Publishes ``p_success`` too; with ``end_episode``
  a success (``consecutive`` frames in a row) also ends the episode on ``episode/event``, so
  the recorder / streamer label it as the task node or the human would.
- ``source: events``: the sim twin's success flag and the human's success / failure keys
  (both already published as ``EpisodeEvent`` ends on ``episode/event``) as reward 1 / 0.

The classifier is asked from a worker thread: a slow or lost server delays rewards, never the
executor; every request has ``timeout_s`` and the client reconnects with back-off. Its pace
(``rate_hz``) and timeouts are wall time: they bound a computation and a network round trip; a
new frame (which arrives at the camera's rate, in the graph's time) is what it waits for. Event
stamps are the node clock's.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import Bool, Float64, String

from rlinf_contracts.transitions import (
    EpisodeEvent,
    TransitionError,
    event_from_json,
    event_to_json,
)
from rlinf_ros.config import RosGraphConfig
from rlinf_ros.conversions import image_to_rgb
from rlinf_ros.nodes.common import (
    declare_config,
    exit_process,
    now_s,
    reliable_qos,
    run_node,
    sensor_qos,
)
from rlinf_ros.online_config import RewardNodeConfig
from rlinf_ros.reward_sources import ClassifierReward, SuccessLatch, event_reward

log = logging.getLogger(__name__)


class RewardNode(Node):
    def __init__(self, cfg: RewardNodeConfig) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        cfg = declare_config(self, cfg)
        cfg.validate()
        self.cfg = cfg
        self.pub_reward = self.create_publisher(Float64, cfg.reward_topic, reliable_qos(10))
        self.pub_success = self.create_publisher(Bool, cfg.success_topic, reliable_qos(10))
        self.pub_p = self.create_publisher(Float64, cfg.probability_topic, reliable_qos(10))
        self.pub_event = self.create_publisher(String, cfg.event_topic, reliable_qos(10))
        self.create_subscription(String, cfg.event_topic, self._on_event, reliable_qos(10))
        self._frame: np.ndarray | None = None
        self._frame_id = 0
        self._stop = threading.Event()
        self.latch = SuccessLatch(cfg.consecutive)
        self.scored = 0
        if cfg.source == "classifier":
            self.create_subscription(Image, cfg.image_topic, self._on_image, sensor_qos())
            self._thread = threading.Thread(
                target=self._classify_loop, name="reward-classifier", daemon=True
            )
            self._thread.start()
        log.info("reward node: source %s -> %s", cfg.source, cfg.reward_topic)

    def _publish(self, reward: float, success: bool) -> None:
        self.pub_reward.publish(Float64(data=float(reward)))
        self.pub_success.publish(Bool(data=bool(success)))

    def _on_event(self, msg: String) -> None:
        if self.cfg.source != "events":
            return
        try:
            ev = event_from_json(msg.data)
        except (TransitionError, ValueError) as e:
            log.warning("reward: bad episode event: %s", e)
            return
        reward = event_reward(ev)
        if reward is not None:
            self._publish(reward, reward > 0)

    def _on_image(self, msg: Image) -> None:
        try:
            self._frame, self._frame_id = image_to_rgb(msg), self._frame_id + 1
        except ValueError as e:
            log.warning("reward: image: %s", e)

    def _classify_loop(self) -> None:
        from policy_server.client import ClientStopped, PolicyClient

        try:
            self.client = PolicyClient(self.cfg.server_url, timeout_s=self.cfg.timeout_s)
            scorer = ClassifierReward(self.client, self.cfg.camera, self.cfg.threshold)
        except ClientStopped:
            return
        log.info(
            "reward: classifier at %s, camera %s (%dx%d)",
            self.cfg.server_url,
            scorer.camera,
            scorer.height,
            scorer.width,
        )
        seen = 0
        while not self._stop.wait(1.0 / self.cfg.rate_hz):
            if self._frame is None or self._frame_id == seen:
                continue  # no new frame: nothing new to say
            seen = self._frame_id
            try:
                p, ok = scorer.score(self._frame)
            except ClientStopped:
                return
            success = self.latch.update(ok)
            self.scored += 1
            self.pub_p.publish(Float64(data=p))
            self._publish(1.0 if success else 0.0, success)
            if success and self.cfg.end_episode and self.latch.run == self.cfg.consecutive:
                now = now_s(self)
                for ev in (
                    EpisodeEvent("end", success=True, reason="classifier", stamp=now),
                    EpisodeEvent("begin", stamp=now),
                ):
                    self.pub_event.publish(String(data=event_to_json(ev)))

    def close(self) -> None:
        self._stop.set()
        client = getattr(self, "client", None)
        if client is not None:
            client.stop()


def build(cfg: RosGraphConfig, name: str | None) -> RewardNode:
    if not cfg.reward.enabled:
        raise ValueError("reward.enabled is false in this config; nothing to start")
    return RewardNode(cfg.reward)


def main(argv: list[str] | None = None) -> int:
    return run_node("reward", build, argv)


if __name__ == "__main__":
    exit_process(main())
