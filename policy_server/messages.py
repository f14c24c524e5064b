"""Typed messages of the policy-server wire (besides observation requests and action responses).

Why dataclasses over loose dicts: the server, the client library, the learner's push helper and
the ROS policy-client node all build or read these frames; one definition with ``to_wire`` /
``from_wire`` keeps them in step, and ``from_wire`` says exactly which field was wrong.
Imports only numpy + msgpack (via :mod:`rlinf_contracts.wire`), like the codec.

>>> meta = ServerMetadata(policy_name="mlp", observation_spec={"state": ("float32", (3,))},
...                       action_dim=2, chunk=4, weight_version=5)
>>> ServerMetadata.from_wire(meta.to_wire()) == meta
True
>>> WeightPush.from_wire({"version": 1, "format": "pickle", "data": b""})
Traceback (most recent call last):
...
policy_server.messages.MessageError: weight push field 'format' must be 'safetensors', got 'pickle'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PROTOCOL = "rlinf-wire/1"
ObservationSpec = dict[str, tuple[str, tuple[int, ...]]]


class MessageError(ValueError):
    """A wire message with a missing or mistyped field; the message names the field."""


def _field(d: Any, what: str, key: str, types: type | tuple[type, ...]) -> Any:
    if not isinstance(d, dict):
        raise MessageError(f"{what} must be a map, got {type(d).__name__}")
    if key not in d:
        raise MessageError(f"{what} is missing field {key!r}")
    value = d[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _tuple(types):
        raise MessageError(
            f"{what} field {key!r} has type {type(value).__name__}, expected {_names(types)}"
        )
    return value


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _names(types: type | tuple[type, ...]) -> str:
    return " | ".join(t.__name__ for t in _tuple(types))


@dataclass(frozen=True)
class ServerMetadata:
    """The frame a server sends once on connect (openpi clients expose it as server metadata)."""

    policy_name: str
    observation_spec: ObservationSpec  # per-sample key -> (dtype, shape); images as images/<cam>
    action_dim: int
    chunk: int
    weight_version: int
    uses_instruction: bool = False
    max_frame_bytes: int = 0
    accepts: tuple[str, ...] = ()  # observation layouts (adapter names) the server understands
    protocol: str = PROTOCOL
    robot_spec: dict[str, Any] | None = (
        None  # rlinf_contracts.spec.RobotSpec.to_dict() of the policy
    )

    def to_wire(self) -> dict[str, Any]:
        return {
            "policy_name": self.policy_name,
            "observation_spec": {
                k: {"dtype": dt, "shape": list(shape)}
                for k, (dt, shape) in self.observation_spec.items()
            },
            "action_dim": self.action_dim,
            "chunk": self.chunk,
            "action_horizon": self.chunk,  # openpi's name for the chunk length
            "weight_version": self.weight_version,
            "uses_instruction": self.uses_instruction,
            "max_frame_bytes": self.max_frame_bytes,
            "accepts": list(self.accepts),
            "protocol": self.protocol,
            "robot_spec": self.robot_spec,
        }

    @classmethod
    def from_wire(cls, d: Any) -> ServerMetadata:
        what = "server metadata"
        raw_spec = _field(d, what, "observation_spec", dict)
        spec: ObservationSpec = {}
        for key, entry in raw_spec.items():
            dtype = _field(entry, f"{what} observation_spec[{key!r}]", "dtype", str)
            shape = _field(entry, f"{what} observation_spec[{key!r}]", "shape", list)
            spec[key] = (dtype, tuple(int(n) for n in shape))
        return cls(
            policy_name=_field(d, what, "policy_name", str),
            observation_spec=spec,
            action_dim=_field(d, what, "action_dim", int),
            chunk=_field(d, what, "chunk", int),
            weight_version=_field(d, what, "weight_version", int),
            uses_instruction=bool(d.get("uses_instruction", False)),
            max_frame_bytes=int(d.get("max_frame_bytes", 0)),
            accepts=tuple(d.get("accepts", ())),
            protocol=str(d.get("protocol", PROTOCOL)),
            robot_spec=d.get("robot_spec") if isinstance(d.get("robot_spec"), dict) else None,
        )


@dataclass(frozen=True)
class WeightPush:
    """Learner -> server on ``/weights``: a full state dict as safetensors bytes.

    ``version`` must exceed the server's current weight version (stale pushes are refused), or be
    ``None`` to let the server assign ``current + 1``.
    """

    data: bytes
    version: int | None = None
    format: str = "safetensors"

    def to_wire(self) -> dict[str, Any]:
        return {"version": self.version, "format": self.format, "data": self.data}

    @classmethod
    def from_wire(cls, d: Any) -> WeightPush:
        what = "weight push"
        fmt = _field(d, what, "format", str)
        if fmt != "safetensors":
            raise MessageError(f"{what} field 'format' must be 'safetensors', got {fmt!r}")
        version = d.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise MessageError(f"{what} field 'version' must be an int or null, got {version!r}")
        return cls(data=_field(d, what, "data", bytes), version=version, format=fmt)


@dataclass(frozen=True)
class WeightAck:
    """Server -> learner after a push: the version now serving, and how the swap went."""

    version: int
    num_tensors: int
    load_ms: float
    wait_ms: float  # time from load done until the swap happened between two batches
    status: str = "applied"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "version": self.version,
            "num_tensors": self.num_tensors,
            "load_ms": self.load_ms,
            "wait_ms": self.wait_ms,
            **self.extra,
        }

    @classmethod
    def from_wire(cls, d: Any) -> WeightAck:
        what = "weight ack"
        known = {"status", "version", "num_tensors", "load_ms", "wait_ms"}
        return cls(
            version=_field(d, what, "version", int),
            num_tensors=_field(d, what, "num_tensors", int),
            load_ms=float(_field(d, what, "load_ms", (int, float))),
            wait_ms=float(_field(d, what, "wait_ms", (int, float))),
            status=_field(d, what, "status", str),
            extra={k: v for k, v in d.items() if k not in known},
        )
