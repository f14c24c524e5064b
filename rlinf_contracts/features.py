"""State features by name: how a robot reading becomes the state vector a :class:`RobotSpec` names.

Why a registry of small functions: the simulator computes its state batched for speed, but a
ROS robot env or policy client has only what the topics carry (joint states, the end-effector
pose, a goal pose, ...). Each feature name of a spec maps here to one function of a
:class:`RobotReading`, so the robot side builds exactly the vector the simulator built; a test
checks the two agree on the same physical state.

>>> import numpy as np
>>> from rlinf_contracts.spec import RobotSpec, StateField, ActionSpace
>>> spec = RobotSpec(state=(StateField("ee_pos", 3), StateField("goal_minus_ee", 3)),
...                  base_position=(-0.5, 0.0, 0.0))
>>> r = RobotReading(q=np.zeros(7), ee_pos=np.array([0.4, 0.0, 0.3]),
...                  goal_pos=np.array([0.5, 0.1, 0.3]))
>>> build_state(spec, r).tolist()
[-0.10000000149011612, 0.0, 0.30000001192092896, 0.10000000149011612, 0.10000000149011612, 0.0]
>>> build_state(RobotSpec(state=(StateField("object_pos", 3),)), r)
Traceback (most recent call last):
...
rlinf_contracts.features.MissingInput: state feature 'object_pos' needs the object position; nothing
has reported it yet (publish it on the object pose topic)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rlinf_contracts.registry import Registry
from rlinf_contracts.spec import RobotSpec


class MissingInput(LookupError):
    """A feature whose input (e.g. the goal pose) has not been received; names what is missing."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass
class RobotReading:
    """What one robot reports at one instant, in its base frame (metres, radians)."""

    q: np.ndarray
    dq: np.ndarray = field(default_factory=lambda: np.zeros(7))
    ee_pos: np.ndarray | None = None
    ee_rot: np.ndarray | None = None  # 3x3, base from end effector
    gripper_width: float = 0.0
    goal_pos: np.ndarray | None = None
    object_pos: np.ndarray | None = None
    object_height: float | None = None  # lift above the object's resting height
    objects: np.ndarray | None = (
        None  # [K, 3] positions of a scene's object slots (obj0, obj1, ...)
    )


Feature = Callable[[RobotReading, np.ndarray], np.ndarray]  # (reading, base_position) -> values
FEATURES: Registry[Feature] = Registry("state feature")

_INPUT_HELP = {
    "ee_pos": "the end-effector pose (robot current_pose topic)",
    "ee_rot": "the end-effector pose (robot current_pose topic)",
    "goal_pos": "the goal position (publish it on the goal topic)",
    "object_pos": "the object position (publish it on the object pose topic)",
    "object_height": "the object height (publish it on the object pose topic)",
    "objects": "the object slots' positions (publish a PoseArray on the objects topic)",
}
_NAMES = {
    "ee_pos": "end-effector pose",
    "ee_rot": "end-effector pose",
    "goal_pos": "goal position",
    "object_pos": "object position",
    "object_height": "object height",
    "objects": "object slots' positions",
}


def _need(r: RobotReading, attr: str, feature: str) -> np.ndarray:
    value = getattr(r, attr)
    if value is None:
        where = _INPUT_HELP[attr].split(" (", 1)[1].rstrip(")")
        raise MissingInput(
            f"state feature '{feature}' needs the {_NAMES[attr]}; nothing has reported it "
            f"yet ({where})"
        )
    return np.asarray(value, dtype=np.float64)


def _register(name: str) -> Callable[[Feature], Feature]:
    return FEATURES.register(name)


@_register("ee_pos")
def _ee_pos(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return _need(r, "ee_pos", "ee_pos") + base


@_register("ee_rot6d")
def _ee_rot6d(r: RobotReading, base: np.ndarray) -> np.ndarray:
    """First two columns of R, column after column (the simulator's layout)."""
    return _need(r, "ee_rot", "ee_rot6d")[:, :2].T.reshape(6)


@_register("joint_pos")
def _joint_pos(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return np.asarray(r.q, dtype=np.float64)


@_register("joint_vel")
def _joint_vel(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return np.asarray(r.dq, dtype=np.float64)


@_register("gripper_width")
def _gripper(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return np.array([r.gripper_width])


@_register("goal_pos")
def _goal(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return _need(r, "goal_pos", "goal_pos") + base


@_register("goal_minus_ee")
def _goal_minus_ee(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return _need(r, "goal_pos", "goal_minus_ee") - _need(r, "ee_pos", "goal_minus_ee")


@_register("object_pos")
def _object(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return _need(r, "object_pos", "object_pos") + base


@_register("object_minus_ee")
def _object_minus_ee(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return _need(r, "object_pos", "object_minus_ee") - _need(r, "ee_pos", "object_minus_ee")


@_register("goal_minus_object")
def _goal_minus_object(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return _need(r, "goal_pos", "goal_minus_object") - _need(r, "object_pos", "goal_minus_object")


@_register("object_height")
def _object_height(r: RobotReading, base: np.ndarray) -> np.ndarray:
    return np.array([float(_need(r, "object_height", "object_height"))])


def _slot_minus_ee(slot: int) -> Feature:
    """``obj<slot>_minus_ee``: a multi-object scene's slot relative to the hand
    (franka_language)."""

    def feature(r: RobotReading, base: np.ndarray) -> np.ndarray:
        objects = _need(r, "objects", f"obj{slot}_minus_ee")
        if len(objects) <= slot:
            raise MissingInput(
                f"state feature 'obj{slot}_minus_ee' needs object slot {slot}; the objects topic "
                f"reports {len(objects)}"
            )
        return objects[slot] - _need(r, "ee_pos", f"obj{slot}_minus_ee")

    return feature


OBJECT_SLOTS = 3
for _slot in range(OBJECT_SLOTS):
    FEATURES.add(f"obj{_slot}_minus_ee", _slot_minus_ee(_slot))


def build_state(spec: RobotSpec, reading: RobotReading | Sequence[RobotReading]) -> np.ndarray:
    """The float32 state vector ``spec`` describes, from one reading per arm (zeroed fields as
    zeros)."""
    readings = [reading] if isinstance(reading, RobotReading) else list(reading)
    if len(readings) != spec.arms:
        raise ValueError(f"the spec describes {spec.arms} arm(s); got {len(readings)} reading(s)")
    base = np.asarray(spec.base_position, dtype=np.float64)
    parts = []
    for r in readings:
        for f in spec.state:
            if f.zeroed:
                parts.append(np.zeros(f.size))
                continue
            values = np.asarray(FEATURES.get(f.name)(r, base), dtype=np.float64).reshape(-1)
            if values.size != f.size:
                raise ValueError(
                    f"state feature '{f.name}' gave {values.size} values; the spec says {f.size}"
                )
            parts.append(values)
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)


# reading inputs -> the features that need them
INPUTS = {
    "goal_pos": ("goal_pos", "goal_minus_ee", "goal_minus_object"),
    "object_pos": ("object_pos", "object_minus_ee", "goal_minus_object"),
    "object_height": ("object_height",),
    "objects": tuple(f"obj{i}_minus_ee" for i in range(OBJECT_SLOTS)),
    "ee_pose": (
        "ee_pos",
        "ee_rot6d",
        "goal_minus_ee",
        "object_minus_ee",
        *(f"obj{i}_minus_ee" for i in range(OBJECT_SLOTS)),
    ),
}


def needs(spec: RobotSpec, source: str) -> bool:
    """Whether ``spec`` reads input ``source`` (a key of :data:`INPUTS`, e.g. ``"goal_pos"``)."""
    return any(f.name in INPUTS[source] for f in spec.state if not f.zeroed)
