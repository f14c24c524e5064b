"""Episodes -> a rosbag2-compatible MCAP file on the robot graph's topics.

Why: a bag is what ROS tools replay and inspect (``ros2 bag play``, Foxglove, PlotJuggler), so
recorded or simulated episodes become something a ROS user can look at and feed to a node.
The file uses rosbag2's MCAP conventions -- profile ``ros2``, schemas as ``ros2msg`` text
(:mod:`rlinf_data.bags.msgdefs`), messages as CDR -- written by ``mcap_ros2`` without rclpy.

Timeline: step ``k`` of an episode is stamped ``t0 + k / control_hz`` (header stamp and log
time alike); ``t0`` is the episode's first stored timestamp, moved later where that would
overlap the previous episode. Each step publishes the state (split over the map's state
topics), every camera (``rgb8`` Image, on ``camera/<name>/image_raw`` unless the map names
its topic), the action and a ``step_info`` JSON with the step's scalars; the final
observation follows one period after the last step, then the ``end`` EpisodeEvent
(``begin`` came at ``t0``). Each episode's attributes go into an MCAP metadata
record, so :func:`rlinf_data.bags.read.open_bag` reads the same episodes back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlinf_contracts.episode import Episode
from rlinf_contracts.transitions import EpisodeEvent, event_to_json
from rlinf_data.bags import msgdefs
from rlinf_data.bags.messages import IMAGE_TYPES, VECTOR_TYPES
from rlinf_data.bags.read import META_EPISODE
from rlinf_data.bags.topics import BagError, Source, TopicMap
from rlinf_data.store_repair import TORN

__all__ = ["BagSummary", "write_bag"]
IMAGE_TYPE = "sensor_msgs/msg/Image"
STRING_TYPE = "std_msgs/msg/String"
FLOAT_TYPE = "std_msgs/msg/Float64"


@dataclass
class BagSummary:
    episodes: int = 0
    steps: int = 0
    messages: int = 0
    skipped: int = 0
    topics: dict[str, str] = field(default_factory=dict)


def _encoder(type_name: str, what: str) -> Any:
    if type_name not in msgdefs.writable() or VECTOR_TYPES.get(type_name).encode is None:
        can = [t for t in msgdefs.writable() if t in VECTOR_TYPES and VECTOR_TYPES.get(t).encode]
        raise BagError(f"topic map {what}: cannot write {type_name}; writable: {', '.join(can)}")
    return VECTOR_TYPES.get(type_name).encode


def _splits(sources: tuple[Source, ...], dim: int) -> list[slice]:
    """The slice of the state vector each source writes (sized sources first, the last takes
    the rest)."""
    out, start = [], 0
    for i, src in enumerate(sources):
        size = src.size or (dim - start if i == len(sources) - 1 else 0)
        if size <= 0 or start + size > dim:
            raise BagError(
                f"topic map state[{i}] ({src.topic}): give each state topic but the last a "
                f"'size' that fits the state's {dim} values"
            )
        out.append(slice(start, start + size))
        start += size
    if start != dim:
        raise BagError(f"topic map state sizes cover {start} of the state's {dim} values")
    return out


class _Bag:
    """The open MCAP writer: one schema per type, the map's encoders, the running summary."""

    def __init__(self, path: Path, tmap: TopicMap) -> None:
        from mcap_ros2.writer import Writer

        self.tmap = tmap
        self.state_enc = [_encoder(s.type, f"state[{i}]") for i, s in enumerate(tmap.state)]
        self.action_enc = _encoder(tmap.action.type, "action")
        image_enc = IMAGE_TYPES.get(IMAGE_TYPE).encode
        assert image_enc is not None  # Image is registered with its encoder above
        self.image_enc = image_enc
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "wb")
        self.writer = Writer(self.file)
        self.schemas: dict[str, Any] = {}
        self.summary = BagSummary()
        self.prev_end: int | None = None

    def put(self, topic: str, type_name: str, msg: dict[str, Any], t: int) -> None:
        if type_name not in self.schemas:
            self.schemas[type_name] = self.writer.register_msgdef(
                type_name, msgdefs.msgdef(type_name)
            )
        self.summary.topics[topic] = type_name
        self.writer.write_message(topic, self.schemas[type_name], msg, log_time=t, publish_time=t)
        self.summary.messages += 1

    def observe(self, ep: Episode, splits: list[slice], obs: dict[str, np.ndarray], t: int) -> None:
        for src, enc, sl in zip(self.tmap.state, self.state_enc, splits, strict=True):
            self.put(src.topic, src.type, enc(np.asarray(obs["state"][sl], np.float64), t, src), t)
        for cam in ep.info.layout.cameras:
            frame = self.image_enc(obs[f"images/{cam}"], t)
            self.put(self.tmap.camera_topic(cam), IMAGE_TYPE, frame, t)

    def episode(self, ep: Episode) -> None:
        tm, layout = self.tmap, ep.info.layout
        ep.validate()
        splits = _splits(tm.state, layout.state_dim)
        period = tm.with_rate(ep.info.control_hz).period_ns
        t0 = max(int(round(float(ep.steps["timestamp"][0]) * 1e9)), period)
        if self.prev_end is not None:
            t0 = max(t0, self.prev_end + period)
        begin = EpisodeEvent("begin", stamp=t0 / 1e9)
        self.put(tm.events, STRING_TYPE, {"data": event_to_json(begin)}, t0)
        n = len(ep)
        for k in range(n):
            t = t0 + k * period
            self.observe(ep, splits, {key: v[k] for key, v in ep.steps.items()}, t)
            vec = np.asarray(ep.steps["action"][k], np.float64)
            self.put(tm.action.topic, tm.action.type, self.action_enc(vec, t, tm.action), t)
            self.put(tm.step_info, STRING_TYPE, {"data": _step_info(ep, k)}, t)
            if tm.reward:
                self.put(tm.reward, FLOAT_TYPE, {"data": float(ep.steps["reward"][k])}, t)
        end_t = t0 + n * period
        if ep.final is not None:
            self.observe(ep, splits, ep.final, end_t)
        status = ep.info.status if ep.info.status != "open" else "truncated"
        end = EpisodeEvent("end", status=status, success=ep.info.success, stamp=end_t / 1e9)
        self.put(tm.events, STRING_TYPE, {"data": event_to_json(end)}, end_t)
        self.writer.add_metadata(
            META_EPISODE,
            {"index": str(self.summary.episodes), "info": json.dumps(ep.info.to_dict())},
        )
        self.summary.episodes += 1
        self.summary.steps += n
        self.prev_end = end_t

    def close(self) -> None:
        self.writer.finish()
        self.file.close()


def _step_info(ep: Episode, k: int) -> str:
    return step_info_json({key: v[k] for key, v in ep.steps.items()})


def step_info_json(step: Mapping[str, Any]) -> str:
    """A step's scalars as ``step_info`` JSON (also what the recorder's live bags write)."""
    return json.dumps(
        {
            "reward": float(step["reward"]),
            "terminated": bool(step["terminated"]),
            "truncated": bool(step["truncated"]),
            "intervention": bool(step["intervention"]),
            "policy_version": int(step["policy_version"]),
            "timestamp": float(step["timestamp"]),
        }
    )


def write_bag(
    episodes: Iterable[Episode],
    path: str | Path,
    tmap: TopicMap | None = None,
    progress: Callable[[Episode], None] | None = None,
) -> BagSummary:
    """Write ``episodes`` into the MCAP file ``path`` on the topics of ``tmap`` (the robot
    graph's by default); ``progress`` is called after each episode. Episodes without a step
    (torn by a kill) are skipped and counted."""
    bag = _Bag(Path(path), tmap or TopicMap())
    try:
        for ep in episodes:
            if TORN in ep.info.extra or not len(ep):
                bag.summary.skipped += 1
            else:
                bag.episode(ep)
            if progress is not None:
                progress(ep)
    finally:
        bag.close()
    return bag.summary
