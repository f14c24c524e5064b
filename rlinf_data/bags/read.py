"""A rosbag2 MCAP recording -> episodes of the episode schema.

Why resample: a bag holds each topic at its own rate and jitter (joint states at 1 kHz, a
camera at 30 Hz, commands at the control rate); an episode is one row per control tick. Ticks
run every ``1 / control_hz`` from the first moment every observation topic has a sample. At
tick ``t`` the observation is the newest sample stamped at or before ``t`` (nearest previous);
the action of step ``t`` is the newest command stamped before the next tick -- the command in
force over the step, which a robot publishes a little after the observation it answers. Ticks
without a command yet are dropped. Stamps come from the message header (the acquisition time),
the bag's log time for header-less messages. The rate: the topic map's ``control_hz`` when it
names one, else the ``control_hz`` an episode's ``rlinf/episode`` metadata recorded (the rate
its steps were written at), else the robot spec's, else 10 Hz.

Topic names: ``ros2 bag record`` stores fully qualified names (``/joint_states``), the topic map
and the recorder use relative ones (``joint_states``); a map's topic matches the bag's topic
of either spelling.

Where episodes start and end (:class:`~rlinf_data.bags.topics.TopicMap` ``split``): at the
robot graph's ``begin`` / ``end`` EpisodeEvent JSON, at pauses of the state stream, or the
whole bag. Steps are the ticks strictly before the end; the newest observation at the end is
the episode's final observation. An end event's ``success`` makes the last step
``terminated`` (reward from the ``reward`` topic), anything else ``truncated``. Bags written by
:mod:`rlinf_data.bags.write` also carry each step's scalars (``step_info``) and each episode's
attributes (MCAP metadata ``rlinf/episode``), and read back to the episodes written.

Memory: the decoded samples of the mapped topics are held until the episodes are built (images
as uint8 frames): a bag is read whole, episodes are then built one at a time.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rlinf_contracts.episode import Episode, EpisodeError, EpisodeInfo, StepLayout
from rlinf_contracts.registry import UnknownNameError
from rlinf_contracts.spec import RobotSpec
from rlinf_contracts.transitions import EpisodeEvent, TransitionError
from rlinf_data.bags.messages import IMAGE_TYPES, VECTOR_TYPES, stamp_ns
from rlinf_data.bags.topics import BagError, Source, TopicMap

log = logging.getLogger(__name__)
META_EPISODE = "rlinf/episode"
NO_STAMP = -(2**62)
__all__ = ["BagEpisodes", "bag_files", "bag_topics", "open_bag"]


def bag_files(path: str | Path) -> list[Path]:
    """The MCAP files of a bag: ``path`` itself, or those of a rosbag2 folder (metadata.yaml)."""
    p = Path(path)
    if p.is_file() and p.suffix == ".mcap":
        return [p]
    if p.is_dir() and (p / "metadata.yaml").is_file():
        files = sorted(p.glob("*.mcap"))
        if files:
            return files
        raise BagError(f"rosbag2 folder {p} holds no .mcap file (other storage formats: no)")
    if not p.exists():
        raise FileNotFoundError(f"no bag at {p}")
    raise BagError(f"{p} is neither a .mcap file nor a rosbag2 folder (with metadata.yaml)")


def _reader(f: Any) -> Any:
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    return make_reader(f, decoder_factories=[DecoderFactory()])


def _summary(file: Path) -> Any:
    """The MCAP summary of ``file``; None for a recording cut off before it (rosbag2 killed
    mid-write), which is then read front to back by :func:`_scan`."""
    from mcap.exceptions import InvalidMagic, McapError

    try:
        with open(file, "rb") as f:
            return _reader(f).get_summary()
    except InvalidMagic as e:
        raise BagError(f"{file} is not an MCAP file: {e}") from None
    except (McapError, ValueError, EOFError, OSError):
        return None


def _scan(file: Path) -> Iterator[tuple[Any, Any, Any]]:
    """(channel, schema, message-or-metadata record) of ``file`` read front to back; stops
    with a warning where a cut-off recording ends."""
    from mcap.exceptions import InvalidMagic, McapError
    from mcap.records import Channel, Message, Metadata, Schema
    from mcap.stream_reader import StreamReader

    schemas: dict[int, Any] = {}
    channels: dict[int, Any] = {}
    n = 0
    with open(file, "rb") as f:
        try:
            for rec in StreamReader(f, skip_magic=False).records:
                if isinstance(rec, Schema):
                    schemas[rec.id] = rec
                elif isinstance(rec, Channel):
                    channels[rec.id] = rec
                elif isinstance(rec, Message) and rec.channel_id in channels:
                    ch = channels[rec.channel_id]
                    n += 1
                    yield ch, schemas.get(ch.schema_id), rec
                elif isinstance(rec, Metadata):
                    yield None, None, rec
        except InvalidMagic as e:
            raise BagError(f"{file} is not an MCAP file: {e}") from None
        except (McapError, ValueError, EOFError, OSError) as e:
            why = f"{type(e).__name__}: {e}".rstrip(": ")
            log.warning("%s is cut off (%s): read the %d messages before the cut", file, why, n)


def bag_topics(path: str | Path) -> dict[str, str]:
    """Topic -> message type of every channel in the bag."""
    out: dict[str, str] = {}
    for file in bag_files(path):
        summary = _summary(file)
        if summary is None:
            for ch, schema, _ in _scan(file):
                if ch is not None:
                    out[ch.topic] = schema.name if schema is not None else "(no schema)"
            continue
        for ch in summary.channels.values():
            schema = summary.schemas.get(ch.schema_id)
            out[ch.topic] = schema.name if schema is not None else "(no schema)"
    return out


def _listing(topics: dict[str, str]) -> str:
    return ", ".join(f"{t} ({ty})" for t, ty in sorted(topics.items())) or "(none)"


@dataclass
class Samples:
    """One stream's samples in stamp order."""

    stamps: np.ndarray  # int64 ns, ascending
    values: list[Any]

    def at(self, ticks: np.ndarray, lo: int, before: bool = False) -> np.ndarray:
        """Index of the newest sample stamped in ``[lo, tick]`` (``[lo, tick)`` with
        ``before``) for each tick; -1 where there is none."""
        idx = np.searchsorted(self.stamps, ticks, side="left" if before else "right") - 1
        ok = idx >= 0
        ok[ok] = self.stamps[idx[ok]] >= lo
        return np.where(ok, idx, -1)

    def within(self, lo: int, hi: int) -> np.ndarray:
        return self.stamps[(self.stamps >= lo) & (self.stamps <= hi)]


@dataclass
class Window:
    """One episode's span of bag time and the event that ended it (None: no end event)."""

    begin: int
    end: int
    event: EpisodeEvent | None = None


@dataclass
class BagEpisodes:
    """An opened bag: ``len`` episodes, built one at a time when iterated."""

    path: Path
    topics: dict[str, str]
    tmap: TopicMap
    spec: RobotSpec | None
    streams: dict[str, Samples]
    windows: list[Window]
    infos: dict[int, dict[str, Any]] = field(default_factory=dict)
    skipped: int = 0
    default_hz: float = 10.0  # the spec's rate: episodes without recorded rate and map rate

    def control_hz(self, index: int) -> float:
        """Episode ``index``'s rate: the map's, else the recorded one, else the default."""
        recorded = self.infos.get(index, {}).get("control_hz")
        if isinstance(recorded, (int, float)) and recorded > 0:
            return self.tmap.control_hz or float(recorded)
        return self.tmap.control_hz or self.default_hz

    def __len__(self) -> int:
        return len(self.windows)

    def __iter__(self) -> Iterator[Episode]:
        for i, w in enumerate(self.windows):
            ep = _episode(self, i, w)
            if ep is None:
                self.skipped += 1
                log.warning("bag %s: episode %d has no whole step; skipped", self.path, i)
                continue
            yield ep


def _check_topics(topics: dict[str, str], tmap: TopicMap, path: Path) -> None:
    """Every mapped topic is in the bag with a type we read; errors list the bag's topics."""
    wants: list[tuple[str, str, Any]] = [
        *((f"state[{i}]", s.topic, VECTOR_TYPES) for i, s in enumerate(tmap.state)),
        ("action", tmap.action.topic, VECTOR_TYPES),
        *((f"cameras.{c}", t, IMAGE_TYPES) for c, t in tmap.cameras.items()),
    ]
    for key, topic, registry in wants:
        if topic not in topics:
            raise BagError(
                f"bag {path} has no topic {topic!r} (topic map {key}); its topics: "
                f"{_listing(topics)}. Name the right ones with --topics MAP.yaml"
            )
        if topics[topic] not in registry:
            raise BagError(
                f"bag {path}: topic {topic!r} (topic map {key}) is {topics[topic]}, which is not "
                f"read as {registry.kind}; readable types: {', '.join(registry.names())}"
            )
    for key, topic, want in (
        ("events", tmap.events, "std_msgs/msg/String"),
        ("step_info", tmap.step_info, "std_msgs/msg/String"),
        ("reward", tmap.reward, "std_msgs/msg/Float64"),
    ):
        if topic and topic in topics and topics[topic] != want:
            raise BagError(
                f"bag {path}: topic {topic!r} (topic map {key}) is {topics[topic]}; want {want}"
            )
    if tmap.split == "events" and tmap.events not in topics:
        raise BagError(
            f"bag {path} has no episode event topic {tmap.events!r} (split: events); its "
            f"topics: {_listing(topics)}. Use split: gap or bag, or name the event topic"
        )


def _event(msg: Any, topic: str) -> EpisodeEvent:
    try:
        return EpisodeEvent.from_wire(json.loads(msg.data))
    except (ValueError, TransitionError) as e:
        raise BagError(
            f"topic {topic!r}: not an episode event JSON ({e}): {msg.data[:80]!r}"
        ) from None


def _step_info(msg: Any, topic: str) -> dict[str, Any]:
    try:
        d = json.loads(msg.data)
    except ValueError as e:
        raise BagError(f"topic {topic!r}: not step info JSON ({e}): {msg.data[:80]!r}") from None
    if not isinstance(d, dict):
        raise BagError(f"topic {topic!r}: step info must be a JSON map, got {msg.data[:80]!r}")
    return d


def _consumers(tmap: TopicMap, topics: dict[str, str]) -> dict[str, list[tuple[str, Any]]]:
    """Topic -> [(stream key, message -> value or None)] for every stream the map reads."""
    out: dict[str, list[tuple[str, Any]]] = {}

    def vec(src: Source) -> Any:
        decode = VECTOR_TYPES.get(topics[src.topic]).decode
        return lambda m: decode(m, src)

    for i, src in enumerate(tmap.state):
        out.setdefault(src.topic, []).append((f"state/{i}", vec(src)))
    out.setdefault(tmap.action.topic, []).append(("action", vec(tmap.action)))
    for cam, topic in tmap.cameras.items():
        decode = IMAGE_TYPES.get(topics[topic]).decode
        out.setdefault(topic, []).append((f"images/{cam}", lambda m, d=decode, t=topic: d(m, t)))
    extras = (
        ("events", tmap.events, lambda m: _event(m, tmap.events)),
        ("step_info", tmap.step_info, lambda m: _step_info(m, tmap.step_info)),
        ("reward", tmap.reward, lambda m: float(m.data)),
    )
    for key, topic, fn in extras:
        if topic and topic in topics:
            out.setdefault(topic, []).append((key, fn))
    return out


def _messages(file: Path, topics: list[str]) -> Iterator[tuple[str, int, Any]]:
    """(topic, log time, decoded message) of ``topics`` in ``file``, and (``""``, 0, record)
    for each metadata record; a cut-off file is read up to its cut."""
    from mcap_ros2.decoder import DecoderFactory

    if _summary(file) is not None:
        with open(file, "rb") as f:
            for _, channel, message, decoded in _reader(f).iter_decoded_messages(
                topics=topics, log_time_order=False
            ):
                yield channel.topic, message.log_time, decoded
            f.seek(0)
            for meta in _reader(f).iter_metadata():
                yield "", 0, meta
        return
    factory, wanted = DecoderFactory(), set(topics)
    for ch, schema, rec in _scan(file):
        if ch is None:
            yield "", 0, rec
        elif ch.topic in wanted:
            decode = factory.decoder_for(ch.message_encoding, schema)
            if decode is None:
                raise BagError(f"{file}: topic {ch.topic!r} is not CDR with a ros2msg schema")
            yield ch.topic, rec.log_time, decode(rec.data)


def _read_streams(
    files: list[Path], consumers: dict[str, list[tuple[str, Any]]]
) -> tuple[dict[str, Samples], dict[int, dict[str, Any]]]:
    from mcap.exceptions import McapError

    raw: dict[str, list[tuple[int, Any]]] = {k: [] for c in consumers.values() for k, _ in c}
    infos: dict[int, dict[str, Any]] = {}
    for file in files:
        try:
            for topic, log_time, decoded in _messages(file, list(consumers)):
                if not topic:
                    if decoded.name == META_EPISODE:
                        infos[int(decoded.metadata["index"])] = json.loads(decoded.metadata["info"])
                    continue
                t = stamp_ns(decoded, log_time)
                for key, fn in consumers[topic]:
                    value = fn(decoded)
                    if value is not None:
                        raw[key].append((t, value))
        except (McapError, EOFError) as e:
            raise BagError(f"{file}: cannot read MCAP messages: {e}") from None
    streams = {}
    for key, rows in raw.items():
        rows.sort(key=lambda r: r[0])
        streams[key] = Samples(np.array([t for t, _ in rows], np.int64), [v for _, v in rows])
    return streams, infos


def _windows(tmap: TopicMap, streams: dict[str, Samples]) -> list[Window]:
    state = streams["state/0"].stamps
    if not len(state):
        return []
    split = tmap.split
    if split == "auto":
        split = "events" if len(streams.get("events", Samples(state[:0], [])).stamps) else "bag"
    if split == "bag":
        return [Window(int(state[0]), int(state[-1]))]
    if split == "gap":
        cuts = np.flatnonzero(np.diff(state) > round(tmap.gap_s * 1e9)) + 1
        bounds = np.split(state, cuts)
        return [Window(int(b[0]), int(b[-1])) for b in bounds]
    out: list[Window] = []
    ev = streams["events"]
    begin: int | None = None
    for t, event in zip(ev.stamps.tolist(), ev.values, strict=True):
        if event.kind == "begin":
            if begin is not None:  # a new begin without an end: the last episode stopped there
                out.append(Window(begin, t))
            begin = t
        else:
            start = begin if begin is not None else (out[-1].end if out else int(state[0]))
            out.append(Window(start, t, event))
            begin = None
    if begin is not None:
        out.append(Window(begin, max(int(state[-1]), begin)))
    return out


def _recorded_cameras(files: list[Path]) -> list[str]:
    """The cameras of the episodes an export wrote into the bag (its metadata records)."""
    out: dict[str, None] = {}
    for file in files:
        if _summary(file) is None:
            continue
        with open(file, "rb") as f:
            for meta in _reader(f).iter_metadata():
                if meta.name == META_EPISODE:
                    info = json.loads(meta.metadata["info"])
                    out.update(dict.fromkeys(info.get("layout", {}).get("cameras", {})))
    return list(out)


def _other_spelling(topic: str) -> str:
    """``/a/b`` <-> ``a/b``: a name as ``ros2 bag record`` stores it and as a map writes it."""
    return topic[1:] if topic.startswith("/") else "/" + topic


def _in_bag(topic: str, topics: dict[str, str]) -> str:
    """``topic`` as the bag spells it (``topic`` itself when the bag has neither spelling)."""
    if not topic or topic in topics or _other_spelling(topic) not in topics:
        return topic
    return _other_spelling(topic)


def _spelled_as_in_bag(tmap: TopicMap, topics: dict[str, str]) -> TopicMap:
    """``tmap`` with each topic renamed to the bag's spelling of it."""
    src = lambda s: replace(s, topic=_in_bag(s.topic, topics))  # noqa: E731
    return replace(
        tmap,
        state=tuple(src(s) for s in tmap.state),
        action=src(tmap.action),
        cameras={c: _in_bag(t, topics) for c, t in tmap.cameras.items()},
        events=_in_bag(tmap.events, topics),
        step_info=_in_bag(tmap.step_info, topics),
        reward=_in_bag(tmap.reward, topics),
    )


def open_bag(
    path: str | Path, tmap: TopicMap | None = None, spec: RobotSpec | None = None
) -> BagEpisodes:
    """Open the bag at ``path`` (a ``.mcap`` file or a rosbag2 folder) as episodes.

    ``spec``: the robot that recorded it (rate, sizes checked, stored with each episode).
    Raises :class:`BagError` naming the topic or key for a bag the map does not fit."""
    tmap = tmap or TopicMap()
    files = bag_files(path)
    topics = bag_topics(path)
    cams = [c.name for c in spec.cameras] if spec is not None else _recorded_cameras(files)
    either = {**topics, **{_other_spelling(t): ty for t, ty in topics.items()}}
    tmap = _spelled_as_in_bag(tmap.with_default_cameras(cams, either), topics)
    _check_topics(topics, tmap, Path(path))
    try:
        streams, infos = _read_streams(files, _consumers(tmap, topics))
    except UnknownNameError as e:  # pragma: no cover - _check_topics refused the type already
        raise BagError(str(e)) from None
    default_hz = spec.control_hz if spec is not None else 10.0
    windows = _windows(tmap, streams)
    return BagEpisodes(Path(path), topics, tmap, spec, streams, windows, infos, 0, default_hz)


def _vectors(stream: Samples, idx: np.ndarray, key: str, path: Path) -> np.ndarray:
    rows = [stream.values[i] for i in idx]
    sizes = sorted({len(r) for r in rows})
    if len(sizes) > 1:
        raise BagError(f"bag {path}: {key} samples change size within an episode: {sizes}")
    return np.stack(rows).astype(np.float32)


def _episode(bag: BagEpisodes, index: int, w: Window) -> Episode | None:
    tm, s, hz = bag.tmap, bag.streams, bag.control_hz(index)
    period = round(1e9 / hz)
    obs_keys = [f"state/{i}" for i in range(len(tm.state))] + [f"images/{c}" for c in tm.cameras]
    firsts = [s[k].within(w.begin, w.end) for k in obs_keys]
    if any(not len(f) for f in firsts):
        return None
    t0 = max(int(f[0]) for f in firsts)
    ticks = np.arange(t0, w.end, period, dtype=np.int64)
    if not len(ticks):
        return None
    act = s["action"].at(np.minimum(ticks + period, w.end + 1), w.begin, before=True)
    ticks, act = ticks[act >= 0], act[act >= 0]
    if not len(ticks):
        return None
    steps: dict[str, np.ndarray] = {
        "state": np.concatenate(
            [
                _vectors(
                    s[f"state/{i}"], s[f"state/{i}"].at(ticks, w.begin), f"state[{i}]", bag.path
                )
                for i in range(len(tm.state))
            ],
            axis=1,
        ),
        "action": _vectors(s["action"], act, "action", bag.path),
    }
    for cam in tm.cameras:
        frames = [s[f"images/{cam}"].values[i] for i in s[f"images/{cam}"].at(ticks, w.begin)]
        if len({f.shape for f in frames}) > 1:
            raise BagError(f"bag {bag.path}: camera {cam!r} changes size within an episode")
        steps[f"images/{cam}"] = np.stack(frames)
    steps.update(_scalars(bag, w, ticks, period))
    final = _final(bag, w, int(ticks[-1]))
    cams = {c: tuple(steps[f"images/{c}"].shape[1:3]) for c in tm.cameras}
    layout = StepLayout(steps["state"].shape[1], steps["action"].shape[1], cams)
    info = _info(bag, index, w, layout, hz)
    episode = Episode(info, steps, final)
    try:
        episode.validate()
    except EpisodeError as e:
        raise BagError(
            f"bag {bag.path}: episode {index} does not fit its attributes: {e}"
        ) from None
    return episode


def _scalars(bag: BagEpisodes, w: Window, ticks: np.ndarray, period: int) -> dict[str, np.ndarray]:
    n, s = len(ticks), bag.streams
    info = s.get("step_info")
    if info is not None and len(info.within(w.begin, w.end)):
        rows = [info.values[i] if i >= 0 else {} for i in info.at(ticks, w.begin)]
        get = lambda k, d: [r.get(k, d) for r in rows]  # noqa: E731
        return {
            "reward": np.asarray(get("reward", 0.0), np.float32),
            "terminated": np.asarray(get("terminated", False), bool),
            "truncated": np.asarray(get("truncated", False), bool),
            "intervention": np.asarray(get("intervention", False), bool),
            "policy_version": np.asarray(get("policy_version", 0), np.int64),
            "timestamp": np.asarray(
                [r.get("timestamp", t / 1e9) for r, t in zip(rows, ticks.tolist(), strict=True)],
                np.float64,
            ),
        }
    reward = np.zeros(n, np.float32)
    if "reward" in s:
        r = s["reward"].at(ticks + period, w.begin, before=True)
        fresh = (r >= 0) & (s["reward"].stamps[np.maximum(r, 0)] >= ticks)
        reward[fresh] = [s["reward"].values[i] for i in r[fresh]]
    terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
    success = w.event is not None and w.event.success
    (terminated if success else truncated)[-1] = True
    return {
        "reward": reward,
        "terminated": terminated,
        "truncated": truncated,
        "intervention": np.zeros(n, bool),
        "policy_version": np.zeros(n, np.int64),
        "timestamp": ticks.astype(np.float64) / 1e9,
    }


def _final(bag: BagEpisodes, w: Window, last_tick: int) -> dict[str, np.ndarray] | None:
    """The newest observation at the episode's end, when a state sample came after the last
    step's tick (else the episode has none)."""
    s, tm = bag.streams, bag.tmap
    end = np.array([w.end], np.int64)
    state0 = s["state/0"]
    i0 = int(state0.at(end, w.begin)[0])
    if i0 < 0 or state0.stamps[i0] <= last_tick:
        return None
    parts = []
    for i in range(len(tm.state)):
        j = int(s[f"state/{i}"].at(end, w.begin)[0])
        parts.append(np.asarray(s[f"state/{i}"].values[j], np.float32))
    final = {"state": np.concatenate(parts)}
    for cam in tm.cameras:
        j = int(s[f"images/{cam}"].at(end, w.begin)[0])
        final[f"images/{cam}"] = s[f"images/{cam}"].values[j]
    return final


def _info(
    bag: BagEpisodes, index: int, w: Window, layout: StepLayout, control_hz: float
) -> EpisodeInfo:
    if index in bag.infos:
        try:
            info = EpisodeInfo.from_dict(bag.infos[index])
        except (EpisodeError, ValueError) as e:
            raise BagError(
                f"bag {bag.path}: metadata of episode {index} is malformed: {e}"
            ) from None
        recorded = sorted(info.layout.cameras)
        if recorded != sorted(layout.cameras):
            images = {t: ty for t, ty in bag.topics.items() if ty in IMAGE_TYPES}
            raise BagError(
                f"bag {bag.path}: episode {index} was recorded with cameras {recorded}, the "
                f"topic map names {sorted(layout.cameras)}; map each camera to its topic under "
                f"'cameras' (--topics). The bag's image topics: {_listing(images)}"
            )
        return info
    spec = bag.spec
    if spec is not None:
        want = StepLayout.from_spec(spec)
        if want != layout:
            raise BagError(
                f"bag {bag.path}: episode {index} has {_layout(layout)}; the robot spec has "
                f"{_layout(want)}. Map the topics to the spec's fields (--topics) or pass "
                "the spec that recorded the bag"
            )
    event = w.event
    return EpisodeInfo(
        task=(spec.task if spec is not None and spec.task else bag.tmap.task),
        layout=layout,
        robot=spec.to_dict() if spec is not None else None,
        instruction=spec.instruction if spec is not None else "",
        control_hz=control_hz,
        source="demo",
        success=bool(event is not None and event.success),
        status=event.status if event is not None else "truncated",
        extra={"bag": str(bag.path), "bag_start_ns": int(w.begin)},
    )


def _layout(layout: StepLayout) -> str:
    cams = " ".join(f"{c}({h}x{w})" for c, (h, w) in layout.cameras.items()) or "none"
    return f"state[{layout.state_dim}] action[{layout.action_dim}] cameras: {cams}"
