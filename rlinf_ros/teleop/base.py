"""The one teleop interface: a device reads a :class:`TeleopInput`; :func:`to_action` maps it
into the robot spec's action space, so the policy client executes a human's command with the
same control law as the policy's (and the step is recorded in the same units).

Devices give either an end-effector *twist* (6 values in [-1, 1]: x, y, z, rx, ry, rz in the
robot base frame, scaled by the spec's ``pos_scale`` / ``rot_scale`` on the robot) or absolute
*joint* targets (leader arm). ``intervention`` is the HG-DAgger flag (held while the human
drives); ``events`` are key presses: ``success``, ``failure``, ``rerecord``.

>>> from rlinf_contracts.spec import RobotSpec
>>> spec = RobotSpec.from_dict({"state": [["joint_pos", 7]],
...                             "action": {"control": "ee_delta", "dim": 7}})
>>> to_action(TeleopInput(twist=np.r_[1.0, 0, 0, 0, 0, 0], gripper=-1.0), spec).tolist()
[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlinf_contracts.control import (
    PANDA_Q_MAX,
    PANDA_Q_MIN,
)  # the range joint_position actions span
from rlinf_contracts.registry import Registry
from rlinf_contracts.spec import RobotSpec

EVENTS = ("success", "failure", "rerecord")


@dataclass
class TeleopInput:
    twist: np.ndarray | None = None  # [6] in [-1, 1]
    joints: np.ndarray | None = None  # [7] rad (leader arm)
    gripper: float | None = None  # -1 closed .. 1 open; None = keep
    intervention: bool = False
    events: list[str] = field(default_factory=list)


class TeleopDevice(Protocol):
    def read(self) -> TeleopInput: ...

    def close(self) -> None: ...


DEVICES: Registry[Any] = Registry("teleop device")


def make_device(name: str, cfg: Any, **context: Any) -> TeleopDevice:
    """Build a registered device (imports its backend module lazily)."""
    import importlib

    importlib.import_module(f"rlinf_ros.teleop.{name}")
    return DEVICES.get(name)(cfg, **context)


def to_action(
    inp: TeleopInput, spec: RobotSpec, q_now: np.ndarray | None = None, last_gripper: float = 1.0
) -> np.ndarray:
    """One arm's action in ``spec``'s space; ``q_now`` is needed for ``joint_delta`` from joints.
    ``ee_impedance`` takes the twist as ``ee_delta_pos`` does: its action moves the impedance
    target by the same normalised position delta."""
    control, grip = spec.action.control, last_gripper if inp.gripper is None else float(inp.gripper)
    if control in ("ee_delta", "ee_delta_pos", "ee_impedance"):
        twist = (
            np.zeros(6) if inp.twist is None else np.clip(np.asarray(inp.twist, np.float64), -1, 1)
        )
        body = twist if control == "ee_delta" else twist[:3]
    elif inp.joints is None:  # a twist device on a joint-space robot: hold still
        body = (
            np.zeros(7)
            if control == "joint_delta"
            else _normalise(q_now if q_now is not None else np.zeros(7))
        )
    elif control == "joint_position":
        body = _normalise(inp.joints)
    elif control == "joint_delta":
        if q_now is None:
            raise ValueError(
                "joint_delta teleop from joint targets needs the follower's joints (q_now)"
            )
        body = np.clip((np.asarray(inp.joints) - q_now) / spec.action.joint_scale, -1, 1)
    else:
        raise ValueError(
            f"teleop cannot drive action control {control!r}; use ee_delta, ee_delta_pos, "
            "ee_impedance, joint_delta or joint_position"
        )
    return np.append(body, np.clip(grip, -1, 1)).astype(np.float32)


def _normalise(q: np.ndarray) -> np.ndarray:
    lo, hi = np.asarray(PANDA_Q_MIN), np.asarray(PANDA_Q_MAX)
    return np.clip(2.0 * (np.asarray(q, np.float64) - lo) / (hi - lo) - 1.0, -1, 1)
