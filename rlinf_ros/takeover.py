"""Who commands the arm this tick, without ROS: the policy, a human (HG-DAgger), or nobody.

- **Nobody** while the robot reports an e-stop or an error (``robot_state`` JSON of the robot
  node): the policy client stops publishing (the robot would refuse anyway, and a policy
  client that keeps streaming targets at a stopped robot makes it jump on reset). It resumes
  with a fresh plan from the measured joints once the robot is clear.
- **The human** while the newest teleop command is younger than ``timeout_s`` and holds the
  intervention flag: its action (in the robot spec's action space) is decoded by the same
  control law as the policy's and the step is labelled ``intervention``.
- **The policy** otherwise.

>>> blocked_reason({"arms": {"panda": {"estop": True, "errors": [], "mode": "IDLE"}}})
'panda: e-stop'
>>> blocked_reason({"arms": {"panda": {"estop": False, "errors": [], "mode": "MOVE"}}})
''
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from rlinf_contracts.features import RobotReading
from rlinf_contracts.transitions import TeleopCommand
from rlinf_ros.policy_loop import Command
from rlinf_ros.robot_io import SpecIO


def blocked_reason(state: dict[str, Any]) -> str:
    """Why the robot takes no commands now ('' when it does), from its robot_state JSON."""
    reasons = []
    for name, arm in (state.get("arms") or {}).items():
        if arm.get("estop"):
            reasons.append(f"{name}: e-stop")
        elif arm.get("errors") or arm.get("mode") == "REFLEX":
            reasons.append(f"{name}: error {arm.get('errors') or arm.get('mode')}")
    return "; ".join(reasons)


class HumanTakeover:
    """The newest teleop command and the robot's blocked state, as the policy client sees them."""

    def __init__(self, io: SpecIO, timeout_s: float, always: bool = False) -> None:
        self.io, self.timeout_s, self.always = io, timeout_s, always
        self._cmd: TeleopCommand | None = None
        self._t = 0.0
        self.blocked = ""
        self.teleop_steps = 0

    def on_teleop(self, text: str, now: float) -> None:
        cmd = TeleopCommand.from_json(text)
        if cmd.action.shape != (self.io.spec.action.dim,):
            raise ValueError(
                f"teleop action has {cmd.action.shape[0]} values; the robot spec's action.dim is "
                f"{self.io.spec.action.dim} ({self.io.spec.action.control})"
            )
        self._cmd, self._t = cmd, now

    def on_robot_state(self, text: str) -> str:
        """Update from robot_state JSON; returns the new blocked reason when it changed, else ''."""
        reason = blocked_reason(json.loads(text))
        changed = reason != self.blocked
        self.blocked = reason
        return reason if changed else ""

    def active(self, now: float) -> TeleopCommand | None:
        """The human's command when it should drive this tick."""
        cmd = self._cmd
        if cmd is None or now - self._t > self.timeout_s:
            return None
        return cmd if cmd.intervention or self.always else None

    def command(self, cmd: TeleopCommand, readings: list[RobotReading]) -> Command:
        step = self.io.decode(np.asarray(cmd.action, np.float64)[None], readings)[0]
        self.teleop_steps += 1
        return Command(
            step.joints,
            step.grippers,
            "teleop",
            action=np.clip(cmd.action, -1, 1).astype(np.float32),
            poses=step.poses,
        )
