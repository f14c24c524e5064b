"""The episode schema: one record for teleop demos, online RL, interventions and eval rollouts.

Why one schema: the episode store, the LeRobot export, the replay buffer and the robot-PC
recorder all read and write the same fields, so a demonstration recorded on a robot can be
replayed into RLPD's demo buffer and exported to LeRobot without a conversion step.

A step ``t`` holds the observation seen at ``t`` (``state``, ``images/<cam>``), the action taken,
and what followed it (``reward``, ``terminated``, ``truncated``). The observation after the last
step is the episode's optional ``final`` observation (needed to bootstrap a truncated episode).

>>> layout = StepLayout(state_dim=3, action_dim=2, cameras={"wrist": (4, 4)})
>>> sorted(layout.fields())[:3]
['action', 'images/wrist', 'intervention']
>>> step = Step(state=np.zeros(3, np.float32), action=np.zeros(2, np.float32), reward=1.0,
...             images={"wrist": np.zeros((4, 4, 3), np.uint8)})
>>> layout.check(step.arrays())
>>> layout.check({**step.arrays(), "state": np.zeros(4, np.float32)})
Traceback (most recent call last):
...
rlinf_contracts.episode.EpisodeError: step field 'state': expected float32 (3,), got float32 (4,)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from rlinf_contracts.spec import RobotSpec

STATUSES = ("open", "complete", "truncated", "aborted")
SOURCES = ("demo", "online", "intervention", "eval")
# per-step scalar fields and their dtypes (state / action / images are sized by the layout)
SCALARS: dict[str, str] = {
    "reward": "float32",
    "terminated": "bool",
    "truncated": "bool",
    "intervention": "bool",
    "policy_version": "int64",
    "timestamp": "float64",
}


class EpisodeError(ValueError):
    """A step or episode that does not fit the schema; the message names the field."""


@dataclass(frozen=True)
class StepLayout:
    """Per-step array sizes of one episode (all steps of an episode share them)."""

    state_dim: int
    action_dim: int
    cameras: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (H, W)

    @classmethod
    def from_spec(cls, spec: RobotSpec) -> StepLayout:
        return cls(spec.state_dim, spec.action_dim, spec.camera_sizes())

    def fields(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """Field name -> (dtype, per-step shape), images as ``images/<cam>``."""
        out: dict[str, tuple[str, tuple[int, ...]]] = {
            "state": ("float32", (self.state_dim,)),
            "action": ("float32", (self.action_dim,)),
        }
        for cam, (h, w) in self.cameras.items():
            out[f"images/{cam}"] = ("uint8", (int(h), int(w), 3))
        out.update({k: (dt, ()) for k, dt in SCALARS.items()})
        return out

    def observation_fields(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """The fields a (final) observation has: ``state`` and the cameras."""
        return {k: v for k, v in self.fields().items() if k == "state" or k.startswith("images/")}

    def check(
        self, arrays: Mapping[str, np.ndarray], batch: int | None = None, only_obs: bool = False
    ) -> None:
        """Raise :class:`EpisodeError` naming the first field whose dtype / shape is wrong.
        ``batch``: arrays carry a leading axis of that length (a whole episode)."""
        want = self.observation_fields() if only_obs else self.fields()
        missing = sorted(set(want) - set(arrays))
        extra = sorted(set(arrays) - set(want))
        if missing or extra:
            raise EpisodeError(
                f"step fields differ from the layout: missing {missing}, unexpected {extra}"
            )
        lead = () if batch is None else (batch,)
        for name, (dtype, shape) in want.items():
            a = np.asarray(arrays[name])
            if a.dtype != np.dtype(dtype) or a.shape != lead + shape:
                kind = "step" if batch is None else "episode"
                raise EpisodeError(
                    f"{kind} field {name!r}: expected {dtype} {lead + shape}, got {a.dtype} "
                    f"{a.shape}"
                )

    def to_dict(self) -> dict[str, Any]:
        return {
            "state_dim": self.state_dim,
            "action_dim": self.action_dim,
            "cameras": {k: [int(h), int(w)] for k, (h, w) in self.cameras.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepLayout:
        try:
            return cls(
                int(d["state_dim"]),
                int(d["action_dim"]),
                {k: (int(v[0]), int(v[1])) for k, v in d.get("cameras", {}).items()},
            )
        except (KeyError, TypeError, IndexError, ValueError) as e:
            raise EpisodeError(f"malformed step layout {dict(d)!r}: {e}") from None


@dataclass
class Step:
    """One control step: the observation at ``t``, the action taken, and what followed."""

    state: np.ndarray
    action: np.ndarray
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    intervention: bool = False
    policy_version: int = 0
    timestamp: float = 0.0
    images: dict[str, np.ndarray] = field(default_factory=dict)

    def arrays(self) -> dict[str, np.ndarray]:
        """The step as schema fields (scalars as 0-d arrays of their schema dtype)."""
        out = {"state": np.asarray(self.state), "action": np.asarray(self.action)}
        out.update({f"images/{c}": np.asarray(v) for c, v in self.images.items()})
        for name, dtype in SCALARS.items():
            out[name] = np.asarray(getattr(self, name), dtype=dtype)
        return out


@dataclass
class EpisodeInfo:
    """Episode attributes, stored as JSON next to the step arrays."""

    task: str
    layout: StepLayout
    robot: dict[str, Any] | None = None  # RobotSpec.to_dict() of the robot / sim that recorded it
    instruction: str = ""
    control_hz: float = 10.0
    source: str = "demo"  # demo | online | intervention | eval
    success: bool = False
    status: str = "open"  # open | complete | truncated | aborted
    extra: dict[str, Any] = field(default_factory=dict)  # anything else JSON-able (seed, operator)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise EpisodeError(f"episode source={self.source!r}; use one of {SOURCES}")
        if self.status not in STATUSES:
            raise EpisodeError(f"episode status={self.status!r}; use one of {STATUSES}")
        if not isinstance(self.task, str) or not self.task:
            raise EpisodeError(f"episode task must be a non-empty string, got {self.task!r}")
        if self.robot is not None:
            RobotSpec.from_dict(self.robot)  # raises SpecError naming the field

    def robot_spec(self) -> RobotSpec | None:
        return None if self.robot is None else RobotSpec.from_dict(self.robot)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["layout"] = self.layout.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EpisodeInfo:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if "layout" not in kw or "task" not in kw:
            raise EpisodeError(f"episode attributes lack 'task' or 'layout': {sorted(d)}")
        kw["layout"] = StepLayout.from_dict(kw["layout"])
        return cls(**kw)


@dataclass
class Episode:
    """A whole episode in memory: ``steps`` maps each schema field to a ``[T, ...]`` array;
    ``final`` is the observation after the last step (``state``, ``images/<cam>``) or None."""

    info: EpisodeInfo
    steps: dict[str, np.ndarray]
    final: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return int(len(self.steps["action"]))

    def validate(self) -> None:
        self.info.layout.check(self.steps, batch=len(self))
        if self.final is not None:
            self.info.layout.check(self.final, only_obs=True)
