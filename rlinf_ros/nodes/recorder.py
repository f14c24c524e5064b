"""Recorder node: the robot PC's steps into a local episode store (demos, HG-DAgger rounds).

Same inputs as the streamer (``policy_client/step``, ``episode/event``; see
``rlinf_ros.recording``), written with :class:`rlinf_data.EpisodeStore` (kill -9 loses at most
the step in flight) and / or, by ``format``, as a rosbag2 MCAP folder
(:class:`rlinf_ros.mcap_sink.McapSink`). Re-recorded (aborted) episodes are discarded unless
``keep_aborted``.
Status JSON -- episodes written with their outcome (``written`` = ``successes`` + ``failures``),
``aborted``, success rate, intervention ratio -- on ``recorder/status`` and, atomically, in
``status_path`` (what ``rlinf collect`` shows; written once more when the node stops), and one
log line each time an episode ends. These are the run's episode counts: the task node only
judges, and ``rlinf collect``'s bar and summary read what the recorder wrote.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from rclpy.node import Node
from std_msgs.msg import String

from rlinf_ros.config import RosGraphConfig
from rlinf_ros.mcap_sink import McapSink
from rlinf_ros.nodes.common import declare_config, exit_process, reliable_qos, run_node
from rlinf_ros.nodes.episode_topics import episode_template, subscribe_episodes
from rlinf_ros.online_config import RecorderNodeConfig
from rlinf_ros.recording import EpisodeSink, StoreSink, TeeSink

log = logging.getLogger(__name__)


def _store(cfg: RecorderNodeConfig) -> StoreSink:
    return StoreSink(cfg.store, discard_aborted=not cfg.keep_aborted)


def _mcap(cfg: RecorderNodeConfig) -> McapSink:
    return McapSink(cfg.mcap_dir, not cfg.keep_aborted, chunk_kib=cfg.mcap_chunk_kib)


# recorder.format -> the sinks it writes (rlinf_ros.online_config.RECORDER_FORMATS)
SINKS: dict[str, tuple[Callable[[RecorderNodeConfig], EpisodeSink], ...]] = {
    "store": (_store,),
    "mcap": (_mcap,),
    "both": (_store, _mcap),
}


class RecorderNode(Node):
    def __init__(self, cfg: RecorderNodeConfig, graph: RosGraphConfig) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        cfg = declare_config(self, cfg)
        self.cfg = cfg
        self.sinks = [make(cfg) for make in SINKS[cfg.format]]
        self.sink = self.sinks[0] if len(self.sinks) == 1 else TeeSink(self.sinks)
        self.assembler = subscribe_episodes(
            self, cfg.episodes, episode_template(graph, cfg.episodes), self.sink
        )
        self.pub_status = self.create_publisher(String, cfg.status_topic, reliable_qos(1))
        self._ended = 0  # episodes ended (written + aborted) when the last line was logged
        self.create_timer(0.5, self._publish_status)
        where = {"store": cfg.store, "mcap": cfg.mcap_dir, "both": f"{cfg.store}, {cfg.mcap_dir}"}
        log.info("recorder: %s episodes into %s", cfg.episodes.source, where[cfg.format])

    def status(self) -> dict:
        out = {**self.assembler.stats.summary(), "open": self.assembler.current is not None}
        for sink in self.sinks:
            if isinstance(sink, StoreSink):
                out.update(store=self.cfg.store, stored=len(sink.store))
            elif isinstance(sink, McapSink):
                out.update(mcap_dir=self.cfg.mcap_dir, bags=len(sink))
        return out

    def close(self) -> None:
        """Finish an MCAP file still open and leave the final counts in ``status_path`` and the
        log (run_node calls this on shutdown: a stop right after an episode ends comes before the
        next status tick, and the last line must still name every episode written)."""
        for sink in self.sinks:
            close = getattr(sink, "close", None)
            if callable(close):
                close()
        self._log_counts()
        self._write_status(json.dumps(self.status()))

    def _log_counts(self) -> None:
        """One line each time an episode ended, never the same line twice."""
        stats = self.assembler.stats
        if stats.written + stats.aborted != self._ended:
            self._ended = stats.written + stats.aborted
            log.info("recorder: %s", stats.describe())

    def _publish_status(self) -> None:
        self._log_counts()
        text = json.dumps(self.status())
        self.pub_status.publish(String(data=text))
        self._write_status(text)

    def _write_status(self, text: str) -> None:
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
