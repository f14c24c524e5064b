"""Recorder node: the robot PC's steps into a local episode store (demos, HG-DAgger rounds).

Same inputs as the streamer (``policy_client/step``, ``episode/event``; see
``rlinf_ros.recording``), written with :class:`rlinf_data.EpisodeStore` (kill -9 loses at most
the step in flight). Re-recorded (aborted) episodes are discarded unless ``keep_aborted``.
Status JSON -- episodes, successes, success rate, intervention ratio -- on ``recorder/status``
and, atomically, in ``status_path`` (what ``rlinf collect ... --source ros`` displays).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from rclpy.node import Node
from std_msgs.msg import String

from rlinf_ros.config import RosGraphConfig
from rlinf_ros.nodes.common import declare_config, exit_process, reliable_qos, run_node
from rlinf_ros.nodes.episode_topics import episode_template, subscribe_episodes
from rlinf_ros.online_config import RecorderNodeConfig
from rlinf_ros.recording import StoreSink

log = logging.getLogger(__name__)


class RecorderNode(Node):
    def __init__(self, cfg: RecorderNodeConfig, graph: RosGraphConfig) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        cfg = declare_config(self, cfg)
        self.cfg = cfg
        self.sink = StoreSink(cfg.store, discard_aborted=not cfg.keep_aborted)
        self.assembler = subscribe_episodes(
            self, cfg.episodes, episode_template(graph, cfg.episodes), self.sink
        )
        self.pub_status = self.create_publisher(String, cfg.status_topic, reliable_qos(1))
        self.create_timer(0.5, self._publish_status)
        log.info("recorder: %s episodes into %s", cfg.episodes.source, cfg.store)

    def status(self) -> dict:
        return {
            **self.assembler.stats.summary(),
            "open": self.assembler.current is not None,
            "store": self.cfg.store,
            "stored": len(self.sink.store),
        }

    def _publish_status(self) -> None:
        text = json.dumps(self.status())
        self.pub_status.publish(String(data=text))
        if self.cfg.status_path:
            path = Path(self.cfg.status_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(path)


def build(cfg: RosGraphConfig, name: str | None) -> RecorderNode:
    if not cfg.recorder.enabled:
        raise ValueError("recorder.enabled is false in this config; nothing to start")
    return RecorderNode(cfg.recorder, cfg)


def main(argv: list[str] | None = None) -> int:
    return run_node("recorder", build, argv)


if __name__ == "__main__":
    exit_process(main())
