"""The recorder's bag sink: each assembled episode into a rosbag2 MCAP file, written live.

Why a sink and not a ``ros2 bag record`` beside the graph: the recorder already joins the
policy client's step records and the judges' episode events into steps
(:class:`rlinf_ros.recording.EpisodeAssembler`); writing those steps as standard messages on
the topics :class:`rlinf_data.bags.topics.TopicMap` reads by default (``joint_states``,
``camera/<name>/image_raw``, the command topic, ``episode/event``, ``rlinf/step_info``) gives
a bag that ROS tools open and that ``rlinf convert`` turns back into the very episodes the
episode store holds. The messages are the export's (:mod:`rlinf_data.bags.write` encoders,
:mod:`rlinf_data.bags.msgdefs` schemas), CDR-encoded from their schema text by ``mcap_ros2`` (the
encoder its rosbag2 writer uses; a test reads every payload back with rclpy's own typesupport),
on the export's timeline: step ``k`` at ``t0 + k / control_hz`` from the
episode's first observation stamp; the observation's own stamp rides in ``step_info``.

Layout: ``mcap_dir`` is a rosbag2 folder -- one ``episode_NNNNNN.mcap`` per episode and a
``metadata.yaml`` (:mod:`rlinf_ros.bag_metadata`) rewritten at every begin and end, so
``ros2 bag info``, Foxglove and ``rlinf convert mcap_dir`` read the whole recording. Crashes:
the file is flushed after every step, so a killed recorder leaves a file readable up to its
last complete chunk (``chunk_kib``); a discarded (re-recorded) episode's file is deleted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlinf_contracts.episode import EpisodeInfo
from rlinf_contracts.transitions import EpisodeEvent, event_to_json
from rlinf_data.bags import msgdefs
from rlinf_data.bags.messages import IMAGE_TYPES
from rlinf_data.bags.read import META_EPISODE
from rlinf_data.bags.topics import TopicMap
from rlinf_data.bags.write import IMAGE_TYPE, STRING_TYPE, _encoder, _splits, step_info_json
from rlinf_ros.bag_metadata import write_metadata
from rlinf_ros.recording import AssembledEnd, AssembledStep

FILE_PATTERN = "episode_*.mcap"


class McapSink:
    """An :class:`rlinf_ros.recording.EpisodeSink` writing one MCAP file per episode."""

    def __init__(
        self,
        mcap_dir: str,
        discard_aborted: bool = True,
        tmap: TopicMap | None = None,
        chunk_kib: int = 1024,
    ) -> None:
        self.dir = Path(mcap_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.tmap = tmap or TopicMap()
        self.discard_aborted, self.chunk_size = discard_aborted, chunk_kib * 1024
        self.state_enc = [_encoder(s.type, f"state[{i}]") for i, s in enumerate(self.tmap.state)]
        self.action_enc = _encoder(self.tmap.action.type, "action")
        image_enc = IMAGE_TYPES.get(IMAGE_TYPE).encode
        assert image_enc is not None  # the Image type is registered with its encoder
        self.image_enc = image_enc
        self.prev_end = 0  # ns: the next episode starts after this one's end
        self._open: _OpenBag | None = None

    def __len__(self) -> int:
        """Episode files in the folder (the open one included)."""
        return len(self.files())

    def files(self) -> list[Path]:
        return sorted(self.dir.glob(FILE_PATTERN))

    def begin(self, episode: int, info: EpisodeInfo) -> None:
        if self._open is not None:  # a begin without an end: keep what was written
            self._close()
        index = len(self.files())
        path = self.dir / f"episode_{index:06d}.mcap"
        tm = self.tmap.with_rate(info.control_hz)
        period = tm.period_ns
        bag = _OpenBag(path, index, info, period, self.chunk_size)
        bag.splits = _splits(tm.state, info.layout.state_dim)
        self._open = bag
        write_metadata(self.dir, self.files())

    def step(self, step: AssembledStep) -> None:
        bag, record, index = self._open, step.record, step.index
        if bag is None:
            return
        if bag.t0 is None:
            stamp = round(record.timestamp * 1e9) if record.timestamp > 0 else time.time_ns()
            bag.t0 = max(stamp, self.prev_end + bag.period, bag.period)
            begin = EpisodeEvent("begin", stamp=bag.t0 / 1e9)
            bag.put(self.tmap.events, STRING_TYPE, {"data": event_to_json(begin)}, bag.t0)
        t = bag.t0 + index * bag.period
        obs = {"state": record.state, **{f"images/{k}": v for k, v in record.images.items()}}
        self._observe(bag, obs, t)
        action = np.asarray(record.action, np.float64)
        tm = self.tmap
        bag.put(tm.action.topic, tm.action.type, self.action_enc(action, t, tm.action), t)
        arrays = record.step(step.reward, step.terminated, step.truncated).arrays()
        bag.put(tm.step_info, STRING_TYPE, {"data": step_info_json(arrays)}, t)
        bag.steps = index + 1
        bag.file.flush()

    def end(self, end: AssembledEnd) -> None:
        bag, self._open = self._open, None
        if bag is None:
            return
        status, success, final = end.status, end.success, end.final
        if end.discarded(self.discard_aborted):
            bag.close()
            bag.path.unlink(missing_ok=True)
            write_metadata(self.dir, self.files())
            return
        if bag.t0 is None:  # no step: the episode is framed at the end's moment
            bag.t0 = max(time.time_ns(), self.prev_end + bag.period)
        end_t = bag.t0 + bag.steps * bag.period
        if final is not None and bag.steps:
            self._observe(bag, final, end_t)
        info = EpisodeInfo.from_dict({**bag.info.to_dict(), "status": status, "success": success})
        event = EpisodeEvent("end", status=status, success=success, stamp=end_t / 1e9)
        bag.put(self.tmap.events, STRING_TYPE, {"data": event_to_json(event)}, end_t)
        bag.writer.add_metadata(
            META_EPISODE, {"index": str(bag.index), "info": json.dumps(info.to_dict())}
        )
        self.prev_end = end_t
        bag.close()
        write_metadata(self.dir, self.files())

    def close(self) -> None:
        """Finish an episode still open (it reads back as cut at its last step)."""
        if self._open is not None:
            self._close()

    def _close(self) -> None:
        bag, self._open = self._open, None
        if bag is not None:
            bag.close()
            write_metadata(self.dir, self.files())

    def _observe(self, bag: _OpenBag, obs: dict[str, Any], t: int) -> None:
        state = np.asarray(obs["state"], np.float64)
        for src, enc, sl in zip(self.tmap.state, self.state_enc, bag.splits, strict=True):
            bag.put(src.topic, src.type, enc(state[sl], t, src), t)
        for cam in bag.info.layout.cameras:
            frame = self.image_enc(np.asarray(obs[f"images/{cam}"], np.uint8), t)
            bag.put(self.tmap.camera_topic(cam), IMAGE_TYPE, frame, t)


class _OpenBag:
    """One episode's MCAP writer: a schema per type and a channel per topic, as rosbag2."""

    def __init__(self, path: Path, index: int, info: EpisodeInfo, period: int, chunk: int) -> None:
        from mcap.writer import Writer

        self.path, self.index, self.info, self.period = path, index, info, period
        self.file = open(path, "wb")
        self.writer = Writer(self.file, chunk_size=chunk)
        self.writer.start(profile="ros2", library="rlinf recorder")
        self.file.flush()
        self.schemas: dict[str, int] = {}
        self.channels: dict[str, int] = {}
        self.encoders: dict[str, Any] = {}  # type -> its CDR encoder
        self.splits: list[slice] = []
        self.t0: int | None = None
        self.steps = 0

    def put(self, topic: str, type_name: str, data: dict[str, Any], t: int) -> None:
        if type_name not in self.schemas:
            from mcap_ros2._dynamic import serialize_dynamic  # the encoder mcap_ros2.writer uses

            text = msgdefs.msgdef(type_name)
            self.schemas[type_name] = self.writer.register_schema(
                type_name, "ros2msg", text.encode()
            )
            self.encoders[type_name] = serialize_dynamic(type_name, text)[type_name]
        if topic not in self.channels:
            self.channels[topic] = self.writer.register_channel(
                topic, "cdr", self.schemas[type_name]
            )
        # Encoded from the schema text, not by rclpy's typesupport: rmw_fastrtps sizes a
        # serialised message by its estimate (a JointState with empty velocity / effort came out
        # 8 bytes past its CDR end, of uninitialised memory), which strict readers refuse
        # (rosbags: "CDR message size mismatch"; Foxglove: trailing bytes).
        payload = self.encoders[type_name](data)
        self.writer.add_message(self.channels[topic], log_time=t, data=payload, publish_time=t)

    def close(self) -> None:
        self.writer.finish()
        self.file.close()
