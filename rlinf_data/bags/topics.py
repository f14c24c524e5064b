"""Which bag topic holds what: the topic map between ROS 2 topics and episode fields.

Why a map and not fixed names: a bag records whatever its graph published. The defaults are
the names the robot graph uses (``joint_states``, the policy client's command topic,
``episode/event``), so a bag recorded from it converts without a map; a foreign bag names its
own topics in a small YAML file (``rlinf convert --topics map.yaml``, see ``docs/bags.md``).
The same map drives both directions: what a bag is read from is what an export writes to.

>>> tm = topic_map_from_dict({"state": [{"topic": "arm/joints", "names": ["j1", "j2"]}],
...                           "cameras": {"wrist": "wrist/image"}, "control_hz": 20})
>>> tm.state[0].topic, tm.cameras, tm.period_ns
('arm/joints', {'wrist': 'wrist/image'}, 50000000)
>>> topic_map_from_dict({"stat": []})
Traceback (most recent call last):
...
rlinf_data.bags.topics.BagError: topic map: unknown key(s) ['stat']; known: ...
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from rlinf_contracts.config import ConfigError

SPLITS = ("auto", "events", "gap", "bag")
COMMAND_TOPIC = "joint_trajectory_controller/joint_trajectory"


class BagError(ConfigError):
    """A bag or topic map that cannot be converted; the message names the topic or key."""


@dataclass(frozen=True)
class Source:
    """One message stream that fills (a slice of) a vector field.

    ``field``: which part of the message (``position`` | ``velocity`` | ``effort`` of a
    JointState; ignored by types with one vector). ``names``: the JointState / JointTrajectory
    joints to take, in this order (all, in message order, when empty). ``size``: the slice
    length when writing several sources into one vector (the last source takes the rest).
    ``type``: the message type an export writes (a bag being read says its own types).
    """

    topic: str
    field: str = "position"
    names: tuple[str, ...] = ()
    size: int = 0
    type: str = "sensor_msgs/msg/JointState"


@dataclass(frozen=True)
class TopicMap:
    """Topics of one bag layout and how episodes are cut from them.

    ``split``: ``events`` cuts at ``begin`` / ``end`` EpisodeEvent JSON on ``events``; ``gap``
    cuts where the first state topic pauses longer than ``gap_s``; ``bag`` makes one episode of
    the whole bag; ``auto`` is ``events`` when the bag has the events topic, else ``bag``.
    ``step_info``: per-step scalars (reward, flags, policy version, timestamp) as JSON, written
    by an export so a bag converts back to the same episodes; optional when reading.
    ``reward``: a ``std_msgs/Float64`` reward topic used when a bag has no ``step_info``.
    ``cameras``: camera -> Image topic; a camera not named is at ``camera/<name>/image_raw``.
    """

    state: tuple[Source, ...] = (Source("joint_states"),)
    action: Source = Source(COMMAND_TOPIC, type="trajectory_msgs/msg/JointTrajectory")
    cameras: dict[str, str] = field(default_factory=dict)
    events: str = "episode/event"
    step_info: str = "rlinf/step_info"
    reward: str = ""
    split: str = "auto"
    gap_s: float = 1.0
    control_hz: float = 0.0  # 0: the robot spec's rate (10 Hz without a spec)
    task: str = "bag"

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise BagError(f"topic map: split={self.split!r}; use one of {SPLITS}")
        if not self.state:
            raise BagError("topic map: 'state' names no topic")
        if self.control_hz < 0 or self.gap_s <= 0:
            raise BagError(
                f"topic map: control_hz must be >= 0 and gap_s > 0, got {self.control_hz}, "
                f"{self.gap_s}"
            )

    @property
    def period_ns(self) -> int:
        return round(1e9 / (self.control_hz or 10.0))

    def with_rate(self, control_hz: float) -> TopicMap:
        """This map at ``control_hz`` unless it names its own rate."""
        if self.control_hz:
            return self
        return replace(self, control_hz=float(control_hz))

    def camera_topic(self, cam: str) -> str:
        """The Image topic of camera ``cam``: the map's, else ``camera/<cam>/image_raw``."""
        return self.cameras.get(cam, f"camera/{cam}/image_raw")

    def with_default_cameras(self, names: list[str], topics: dict[str, str]) -> TopicMap:
        """This map plus cameras ``names`` (a spec's, or those an export recorded) it does not
        name, read from their default topics where the bag has them."""
        found = {c: self.camera_topic(c) for c in names if self.camera_topic(c) in topics}
        return replace(self, cameras={**found, **self.cameras})

    def required(self) -> list[str]:
        """Topics every episode needs: state, action and cameras."""
        return [s.topic for s in self.state] + [self.action.topic, *self.cameras.values()]


def _source(d: Any, key: str, default_type: str) -> Source:
    if isinstance(d, str):
        return Source(d, type=default_type)
    if not isinstance(d, dict) or "topic" not in d:
        raise BagError(f"topic map key {key!r}: expected a topic name or a map with 'topic'")
    known = {f.name for f in fields(Source)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise BagError(f"topic map key {key!r}: unknown key(s) {unknown}; known: {sorted(known)}")
    kw = {**d, "names": tuple(d.get("names", ())), "type": d.get("type", default_type)}
    return Source(**kw)


def topic_map_from_dict(d: dict[str, Any]) -> TopicMap:
    """A :class:`TopicMap` from plain data (a YAML file's content); errors name the key."""
    if not isinstance(d, dict):
        raise BagError(f"a topic map must be a map, got {type(d).__name__}")
    known = {f.name for f in fields(TopicMap)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise BagError(f"topic map: unknown key(s) {unknown}; known: {sorted(known)}")
    kw = dict(d)
    if "state" in d:
        rows = d["state"] if isinstance(d["state"], list) else [d["state"]]
        kw["state"] = tuple(
            _source(r, f"state[{i}]", "sensor_msgs/msg/JointState") for i, r in enumerate(rows)
        )
    if "action" in d:
        kw["action"] = _source(d["action"], "action", "trajectory_msgs/msg/JointTrajectory")
    if "cameras" in d and not isinstance(d["cameras"], dict):
        raise BagError("topic map key 'cameras': expected a map camera -> Image topic")
    try:
        return TopicMap(**kw)
    except TypeError as e:
        raise BagError(f"malformed topic map: {e}") from None


def load_topic_map(path: str | Path | None) -> TopicMap:
    """The topic map in YAML file ``path`` (the robot graph's defaults when None)."""
    if path is None:
        return TopicMap()
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise BagError(f"no topic map file at {path}") from None
    except yaml.YAMLError as e:
        raise BagError(f"topic map {path} is not valid YAML: {e}") from None
    return topic_map_from_dict(data or {})
