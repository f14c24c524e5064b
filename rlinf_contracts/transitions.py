"""Typed messages of the transition path: robot PC -> ``ws://learner/transitions`` -> learner.

Why dataclasses with ``to_wire`` / ``from_wire``: the policy client (which publishes a
:class:`StepRecord` per control tick on ROS), the recorder, the streamer and the learner's
ingest all build or read these frames; one definition keeps them in step and ``from_wire`` names
the field that is wrong. numpy + msgpack only (through :mod:`rlinf_contracts.wire`).

The wire conversation (one WebSocket per robot, ``Authorization: Bearer <token>``)::

    robot  -> IngestHello(robot_id, protocol)
    learner-> IngestWelcome(robot_id, last_seq)          # highest seq it holds durably (-1: none)
    robot  -> TransitionBatch(robot_id, items=[Transition, ...])   (several in flight)
    learner-> TransitionAck(acked)                        # cumulative: every seq <= acked is stored

``seq`` numbers one robot's items from 0 without gaps; an ack is sent only after the items are
in the episode store, so the robot may forget them; items it sends again (after a reconnect)
are recognised by seq and acknowledged without a second write.

>>> step = StepRecord(episode=3, state=np.zeros(2, np.float32), action=np.ones(1, np.float32))
>>> StepRecord.from_wire(unpackb(packb(step.to_wire()))).episode
3
>>> item = Transition(seq=7, episode=3, index=0, step=step, info={"task": "reach"})
>>> back = Transition.from_wire(unpackb(packb(item.to_wire())))
>>> back.seq, back.step.action.tolist(), back.info
(7, [1.0], {'task': 'reach'})
>>> Transition.from_wire({"seq": -1, "episode": 0, "index": 0})
Traceback (most recent call last):
...
rlinf_contracts.transitions.TransitionError: transition field 'seq' must be >= 0, got -1
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlinf_contracts.episode import STATUSES, Step
from rlinf_contracts.wire import clip, packb, unpackb  # noqa: F401  (doctest names)

PROTOCOL = "rlinf-transitions/1"
PATH = "/transitions"
END_KINDS = ("", *STATUSES[1:])  # "" = no end; else complete | truncated | aborted


class TransitionError(ValueError):
    """A transition message with a missing or mistyped field; the message names the field."""


def _get(d: Any, what: str, key: str, types: type | tuple[type, ...], default: Any = ...) -> Any:
    if not isinstance(d, dict):
        raise TransitionError(f"{what} must be a map, got {type(d).__name__}")
    if key not in d:
        if default is ...:
            raise TransitionError(f"{what} is missing field {key!r}")
        return default
    value = d[key]
    if isinstance(value, np.generic):
        value = value.item()
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in _tuple(types))
    if not ok:
        raise TransitionError(
            f"{what} field {key!r} has type {type(value).__name__}, expected "
            f"{' | '.join(t.__name__ for t in _tuple(types))}"
        )
    return value


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _array(d: dict[str, Any], what: str, key: str) -> np.ndarray:
    value = d.get(key)
    if not isinstance(value, np.ndarray):
        raise TransitionError(
            f"{what} field {key!r} must be an array, got {clip(type(value).__name__)}"
        )
    return value


@dataclass
class StepRecord:
    """One control tick as the robot PC sees it: the observation, the action executed, who acted.

    Published by the policy client (``policy_client/step``) every tick it commands the arm;
    ``intervention`` marks a tick a human (teleop) drove. Reward and done flags are filled in
    later from episode events (:class:`rlinf_ros.recording.EpisodeAssembler`).
    """

    episode: int
    state: np.ndarray
    action: np.ndarray
    images: dict[str, np.ndarray] = field(default_factory=dict)
    intervention: bool = False
    policy_version: int = 0
    timestamp: float = 0.0

    def to_wire(self) -> dict[str, Any]:
        return {
            "episode": int(self.episode),
            "state": np.asarray(self.state, np.float32),
            "action": np.asarray(self.action, np.float32),
            "images": {k: np.asarray(v, np.uint8) for k, v in self.images.items()},
            "intervention": bool(self.intervention),
            "policy_version": int(self.policy_version),
            "timestamp": float(self.timestamp),
        }

    @classmethod
    def from_wire(cls, d: Any) -> StepRecord:
        what = "step record"
        images = _get(d, what, "images", dict, {})
        return cls(
            episode=_get(d, what, "episode", int),
            state=_array(d, what, "state"),
            action=_array(d, what, "action"),
            images={str(k): _array(images, f"{what} images", k) for k in images},
            intervention=_get(d, what, "intervention", bool, False),
            policy_version=_get(d, what, "policy_version", int, 0),
            timestamp=float(_get(d, what, "timestamp", (int, float), 0.0)),
        )

    def step(self, reward: float = 0.0, terminated: bool = False, truncated: bool = False) -> Step:
        """The episode-schema step of this record, with what followed it."""
        return Step(
            state=np.asarray(self.state, np.float32),
            action=np.asarray(self.action, np.float32),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            intervention=self.intervention,
            policy_version=self.policy_version,
            timestamp=self.timestamp,
            images={k: np.asarray(v, np.uint8) for k, v in self.images.items()},
        )


@dataclass
class EpisodeEvent:
    """An episode boundary or outcome: ``kind`` ``begin`` | ``end``; an end says ``status``
    (complete | truncated | aborted) and ``success``. Sent by the task node (sim twin), the
    teleop node (success / failure / re-record keys) and the reward sources."""

    kind: str
    status: str = "complete"
    success: bool = False
    reason: str = ""
    stamp: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("begin", "end"):
            raise TransitionError(
                f"episode event field 'kind' must be 'begin' or 'end', got {clip(self.kind)}"
            )
        if self.status not in STATUSES[1:]:
            raise TransitionError(
                f"episode event field 'status' must be one of {STATUSES[1:]}, got "
                f"{clip(self.status)}"
            )

    def to_wire(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "status": self.status,
            "success": self.success,
            "reason": self.reason,
            "stamp": self.stamp,
        }

    @classmethod
    def from_wire(cls, d: Any) -> EpisodeEvent:
        what = "episode event"
        return cls(
            kind=_get(d, what, "kind", str),
            status=_get(d, what, "status", str, "complete"),
            success=_get(d, what, "success", bool, False),
            reason=_get(d, what, "reason", str, ""),
            stamp=float(_get(d, what, "stamp", (int, float), 0.0)),
        )


@dataclass
class Transition:
    """One item on ``/transitions``: a step of a robot episode and/or that episode's end.

    ``index`` is the step's place in the robot's episode ``episode``; ``info`` (an
    ``EpisodeInfo.to_dict()``) rides on index 0. An item with ``end`` set closes the episode
    (``final``: the observation after its last step); ``step`` may then be None (an end alone).
    """

    seq: int
    episode: int
    index: int
    step: StepRecord | None = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] | None = None
    end: str = ""
    success: bool = False
    final: dict[str, np.ndarray] | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "episode": self.episode,
            "index": self.index,
            "step": None if self.step is None else self.step.to_wire(),
            "reward": float(self.reward),
            "terminated": bool(self.terminated),
            "truncated": bool(self.truncated),
            "info": self.info,
            "end": self.end,
            "success": bool(self.success),
            "final": self.final,
        }

    @classmethod
    def from_wire(cls, d: Any) -> Transition:
        what = "transition"
        out = cls(
            seq=_get(d, what, "seq", int),
            episode=_get(d, what, "episode", int),
            index=_get(d, what, "index", int),
        )
        for key in ("seq", "episode", "index"):
            if getattr(out, key) < 0:
                raise TransitionError(f"{what} field {key!r} must be >= 0, got {getattr(out, key)}")
        raw = d.get("step")
        out.step = None if raw is None else StepRecord.from_wire(raw)
        out.reward = float(_get(d, what, "reward", (int, float), 0.0))
        out.terminated = _get(d, what, "terminated", bool, False)
        out.truncated = _get(d, what, "truncated", bool, False)
        out.info = _get(d, what, "info", (dict, type(None)), None)
        out.end = _get(d, what, "end", str, "")
        if out.end not in END_KINDS:
            raise TransitionError(
                f"{what} field 'end' must be one of {END_KINDS}, got {clip(out.end)}"
            )
        out.success = _get(d, what, "success", bool, False)
        final = _get(d, what, "final", (dict, type(None)), None)
        out.final = (
            None if final is None else {str(k): _array(final, f"{what} final", k) for k in final}
        )
        if out.step is None and not out.end:
            raise TransitionError(f"{what} {out.seq} has neither a step nor an end")
        return out


@dataclass
class IngestHello:
    robot_id: str
    protocol: str = PROTOCOL

    def to_wire(self) -> dict[str, Any]:
        return {"type": "hello", "robot_id": self.robot_id, "protocol": self.protocol}

    @classmethod
    def from_wire(cls, d: Any) -> IngestHello:
        robot = _get(d, "ingest hello", "robot_id", str)
        if not robot or len(robot) > 128 or "/" in robot:
            raise TransitionError(
                f"ingest hello field 'robot_id' must be 1-128 chars without '/', got {clip(robot)}"
            )
        return cls(robot_id=robot, protocol=_get(d, "ingest hello", "protocol", str, PROTOCOL))


@dataclass
class IngestWelcome:
    robot_id: str
    last_seq: int  # highest seq stored for this robot; -1 when none

    def to_wire(self) -> dict[str, Any]:
        return {"type": "welcome", "robot_id": self.robot_id, "last_seq": self.last_seq}

    @classmethod
    def from_wire(cls, d: Any) -> IngestWelcome:
        return cls(
            robot_id=_get(d, "ingest welcome", "robot_id", str),
            last_seq=_get(d, "ingest welcome", "last_seq", int),
        )


@dataclass
class TransitionBatch:
    robot_id: str
    items: list[Transition]

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": "batch",
            "robot_id": self.robot_id,
            "items": [t.to_wire() for t in self.items],
        }

    @classmethod
    def from_wire(cls, d: Any) -> TransitionBatch:
        items = _get(d, "transition batch", "items", list)
        return cls(
            robot_id=_get(d, "transition batch", "robot_id", str),
            items=[Transition.from_wire(t) for t in items],
        )


@dataclass
class TransitionAck:
    acked: int  # every seq <= acked is durable at the learner
    duplicates: int = 0  # items of the batch that were already stored (re-sent after a reconnect)

    def to_wire(self) -> dict[str, Any]:
        return {"type": "ack", "acked": self.acked, "duplicates": self.duplicates}

    @classmethod
    def from_wire(cls, d: Any) -> TransitionAck:
        return cls(
            acked=_get(d, "transition ack", "acked", int),
            duplicates=_get(d, "transition ack", "duplicates", int, 0),
        )


def encode(msg: Any) -> bytes:
    """One message -> one wire frame."""
    return packb(msg.to_wire())


def batch_frame(robot_id: str, packed_items: list[bytes]) -> bytes:
    """A :class:`TransitionBatch` frame from items already packed one by one (a spool keeps
    them packed): msgpack is concatenative, so the items are joined, never re-encoded.

    >>> items = [packb(Transition(seq=i, episode=0, index=i, end="aborted").to_wire())
    ...          for i in range(2)]
    >>> [t.seq for t in TransitionBatch.from_wire(unpackb(batch_frame("r0", items))).items]
    [0, 1]
    """
    import msgpack

    p = msgpack.Packer(use_bin_type=True)
    head = (
        p.pack_map_header(3)
        + p.pack("type")
        + p.pack("batch")
        + p.pack("robot_id")
        + p.pack(robot_id)
    )
    return head + p.pack("items") + p.pack_array_header(len(packed_items)) + b"".join(packed_items)


@dataclass
class TeleopCommand:
    """Teleop node -> policy client (``teleop/command``, JSON): an action in the robot spec's
    action space (normalised to [-1, 1], same meaning as the policy's) and whether the human is
    driving right now (``intervention``: the HG-DAgger flag, held while the human takes over).

    >>> cmd = TeleopCommand(np.array([0.5, -1.0]), True, 2.0)
    >>> TeleopCommand.from_json(cmd.to_json()).action.tolist()
    [0.5, -1.0]
    """

    action: np.ndarray
    intervention: bool = False
    stamp: float = 0.0

    def to_json(self) -> str:
        import json

        return json.dumps(
            {
                "action": [float(x) for x in np.asarray(self.action).ravel()],
                "intervention": bool(self.intervention),
                "stamp": float(self.stamp),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> TeleopCommand:
        d = _json(text, "teleop command")
        action = _get(d, "teleop command", "action", list)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in action):
            raise TransitionError(
                f"teleop command field 'action' must be a list of numbers, got {clip(action)}"
            )
        return cls(
            np.asarray(action, np.float32),
            _get(d, "teleop command", "intervention", bool, False),
            float(_get(d, "teleop command", "stamp", (int, float), 0.0)),
        )


def event_to_json(ev: EpisodeEvent) -> str:
    import json

    return json.dumps(ev.to_wire())


def event_from_json(text: str) -> EpisodeEvent:
    """An :class:`EpisodeEvent` from the JSON on ``episode/event`` (errors name the field)."""
    return EpisodeEvent.from_wire(_json(text, "episode event"))


def _json(text: str, what: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError as e:
        raise TransitionError(f"{what} is not JSON: {clip(str(e))}") from None
