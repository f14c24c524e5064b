"""Scripted teleop for tests and the sim twin: a "human" that drives the hand to the goal.

It reads the end-effector pose and the goal (both in the robot base frame, as the teleop node
receives them) and commands a twist toward the goal (the reach oracle in EE terms). Modes
(``teleop.script``; ``task: push`` picks :class:`ScriptedPush`, the push oracle): ``always: true``
drives every tick (teleop-only demonstrations); otherwise it watches and takes over when the policy
*drifts* -- the distance to the goal has not shrunk by ``progress_m`` within ``patience_s``, or
(with ``regress_m`` set) the hand has moved more than ``regress_m`` farther from the goal than its
closest approach this episode (off the path, at once) -- and hands back once within ``release_m``
(HG-DAgger with a scripted human).

>>> s = ScriptedReach(pos_scale=0.05, always=True, clock=lambda: 0.0)
>>> s.on_pose(np.zeros(3)); s.on_goal(np.array([0.01, 0.0, -0.2]))
>>> np.round(s.read().twist[:3], 3).tolist()
[0.2, 0.0, -1.0]
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rlinf_ros.teleop.base import DEVICES, TeleopInput


class ScriptedReach:
    def __init__(
        self,
        pos_scale: float = 0.05,
        always: bool = True,
        patience_s: float = 1.0,
        progress_m: float = 0.02,
        release_m: float = 0.02,
        gain: float = 1.0,
        regress_m: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pos_scale, self.always, self.gain = pos_scale, always, gain
        self.patience_s, self.progress_m, self.release_m = patience_s, progress_m, release_m
        self.regress_m = regress_m
        self._closest = float("inf")  # closest approach to the goal this episode
        self._clock = clock
        self.ee: np.ndarray | None = None
        self.goal: np.ndarray | None = None
        self._ref: tuple[float, float] | None = None  # (time, distance) progress is measured from
        self.driving = False

    def on_pose(self, position: np.ndarray) -> None:
        self.ee = np.asarray(position, np.float64)

    def on_goal(self, position: np.ndarray) -> None:
        if self.goal is None or not np.allclose(position, self.goal):
            self._ref, self.driving, self._closest = None, False, float("inf")  # a new episode
        self.goal = np.asarray(position, np.float64)

    def _drifting(self, dist: float, now: float) -> bool:
        if self.driving:
            self.driving = dist > self.release_m
            if not self.driving:
                self._ref = (now, dist)
            return self.driving
        self._closest = min(self._closest, dist)
        if self.regress_m is not None and dist > self._closest + self.regress_m:
            self.driving = True  # heading away from the goal: off the path, take over now
        elif self._ref is None or dist < self._ref[1] - self.progress_m:
            self._ref = (now, dist)
        elif now - self._ref[0] > self.patience_s and dist > self.release_m:
            self.driving = True
        return self.driving

    def read(self) -> TeleopInput:
        if self.ee is None or self.goal is None:
            return TeleopInput()
        delta = self.goal - self.ee
        twist = np.zeros(6)
        twist[:3] = np.clip(self.gain * delta / self.pos_scale, -1, 1)
        take = self.always or self._drifting(float(np.linalg.norm(delta)), self._clock())
        return TeleopInput(twist=twist, gripper=1.0, intervention=take)

    def close(self) -> None:
        pass


class ScriptedPush(ScriptedReach):
    """A scripted human for push: the simulator's push oracle on the poses the teleop node hears
    (hand, object, goal; robot base frame). Hover behind the object on the far side from the goal,
    descend, push through it toward the goal, gripper closed. ``always: false`` takes over when the
    *object* stops approaching the goal (drift, as :class:`ScriptedReach` does for the hand)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.obj: np.ndarray | None = None

    def on_object(self, position: np.ndarray) -> None:
        self.obj = np.asarray(position, np.float64)

    def target(self) -> np.ndarray:
        """Where the hand should go next (the push oracle's way points)."""
        obj, ee = self.obj, self.ee
        direction = self.goal[:2] - obj[:2]  # type: ignore[index]  # obj / ee set before target()
        direction = direction / max(float(np.linalg.norm(direction)), 1e-6)
        pre = obj[:2] - direction * 0.06  # type: ignore[index]  # obj / ee set before target()
        rel = obj[:2] - ee[:2]  # type: ignore[index]  # obj / ee set before target()
        along = float(rel @ direction)
        lateral = float(np.linalg.norm(rel - along * direction))
        low = obj[2] + 0.005  # type: ignore[index]  # obj / ee set before target()
        if 0.02 < along < 0.09 and lateral < 0.02 and abs(ee[2] - low) < 0.02:  # type: ignore[index]  # obj / ee set before target()
            return np.array([*(obj[:2] + direction * 0.05), low])  # type: ignore[index]  # pushing
        if np.linalg.norm(ee[:2] - pre) > 0.015:  # type: ignore[index]  # obj / ee set before target()
            return np.array([*pre, obj[2] + 0.08])  # type: ignore[index]  # hover behind the object
        return np.array([*pre, low])  # descend behind it

    def read(self) -> TeleopInput:
        if self.ee is None or self.goal is None or self.obj is None:
            return TeleopInput()
        twist = np.zeros(6)
        twist[:3] = np.clip(self.gain * (self.target() - self.ee) / self.pos_scale, -1, 1)
        gap = float(np.linalg.norm(self.goal[:2] - self.obj[:2]))
        take = self.always or self._drifting(gap, self._clock())
        return TeleopInput(twist=twist, gripper=-1.0, intervention=take)


SCRIPTS = {"reach": ScriptedReach, "push": ScriptedPush}  # teleop.script.task -> the scripted human


def _make(cfg: Any, spec: Any = None, **_: Any) -> ScriptedReach:
    opts = dict(cfg.script)
    task = opts.pop("task", "reach")
    if task not in SCRIPTS:
        raise ValueError(f"key 'teleop.script.task' is {task!r}; known: {sorted(SCRIPTS)}")
    opts.setdefault("always", cfg.always_intervene)
    if spec is not None:
        opts.setdefault("pos_scale", spec.action.pos_scale)
    return SCRIPTS[task](**opts)


DEVICES.add("scripted", _make)
