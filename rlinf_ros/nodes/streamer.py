"""Transition streamer node: the robot PC's steps to ``ws://learner/transitions``.

Subscribes to ``policy_client/step`` and ``episode/event`` (the recorder's inputs, see
``rlinf_ros.recording``), assembles steps with reward and done flags, and hands each to
:class:`rlinf_ros.streaming.TransitionStreamer`: numbered, spooled to disk, sent with a bounded
window, acknowledged by the learner only once stored. The control loop never waits for it.
Status JSON (backlog, acked seq, connection) on ``streamer/status`` every second.
"""

from __future__ import annotations

import json
import logging

from rclpy.node import Node
from std_msgs.msg import String

from rlinf_ros.config import RosGraphConfig
from rlinf_ros.nodes.common import (
    NOT_PARAMETERS,
    declare_config,
    exit_process,
    reliable_qos,
    run_node,
)
from rlinf_ros.nodes.episode_topics import episode_template, subscribe_episodes
from rlinf_ros.online_config import StreamerNodeConfig
from rlinf_ros.recording import StreamSink
from rlinf_ros.streaming import TransitionStreamer

log = logging.getLogger(__name__)


class StreamerNode(Node):
    def __init__(self, cfg: StreamerNodeConfig, graph: RosGraphConfig) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        # `stream` stays YAML-only; the token is read from a file / the environment, never a
        # parameter
        cfg = declare_config(self, cfg, skip=(*NOT_PARAMETERS, "stream"))
        self.cfg = cfg
        self.streamer = TransitionStreamer(
            cfg.resolved_stream(), token_hint=cfg.token_source()
        ).start()
        self.assembler = subscribe_episodes(
            self, cfg.episodes, episode_template(graph, cfg.episodes), StreamSink(self.streamer)
        )
        self.pub_status = self.create_publisher(String, cfg.status_topic, reliable_qos(1))
        self.create_timer(1.0, self._publish_status)
        log.info(
            "streamer: robot %s -> %s (spool %s)",
            cfg.stream.robot_id,
            cfg.stream.url,
            cfg.stream.spool_dir,
        )

    def status(self) -> dict:
        return {**self.streamer.status(), **self.assembler.stats.summary()}

    def _publish_status(self) -> None:
        self.pub_status.publish(String(data=json.dumps(self.status())))

    def close(self) -> None:
        # one line a supervisor reports (``rlinf online``): what this stop left unsent
        self.streamer.stop()
        spool, backlog = self.streamer.spool, self.streamer.backlog
        per_step = spool.bytes / max(1, spool.pending_count())  # frames on disk, acked ones too
        log.info(
            "streamer: stopped with %d steps unsent (%.3f MB) in %s",
            backlog,
            backlog * per_step / 2**20,
            self.cfg.stream.spool_dir,
        )


def build(cfg: RosGraphConfig, name: str | None) -> StreamerNode:
    if not cfg.streamer.enabled:
        raise ValueError("streamer.enabled is false in this config; nothing to start")
    return StreamerNode(cfg.streamer, cfg)


def main(argv: list[str] | None = None) -> int:
    return run_node("streamer", build, argv)


if __name__ == "__main__":
    exit_process(main())
