"""Scripted teleop for tests and the sim twin: a "human" that drives the hand to the goal.

It reads the end-effector pose and the goal (both in the robot base frame, as the teleop node
receives them) and commands a twist toward the goal (the reach oracle in EE terms). Modes
(``teleop.script``; ``task: push`` picks :class:`ScriptedPush`, the push oracle, ``task: insert``
:class:`ScriptedInsert`, the peg-insertion oracle): ``always: true``
drives every tick (teleop-only demonstrations); otherwise it watches and takes over when the policy
*drifts* -- the distance to the goal has not shrunk by ``progress_m`` within ``patience_s``, or
(with ``regress_m`` set) the hand has moved more than ``regress_m`` farther from the goal than its
closest approach this episode (off the path, at once) -- and hands back once within ``release_m``
(HG-DAgger with a scripted human). ``noise`` (a fraction of the full action, seeded by ``seed``)
adds Gaussian noise to every translation command: an operator who misses -- the near-miss and
failed episodes a success classifier needs as negatives.

>>> s = ScriptedReach(pos_scale=0.05, always=True, clock=lambda: 0.0)
>>> s.on_pose(np.zeros(3)); s.on_goal(np.array([0.01, 0.0, -0.2]))
>>> np.round(s.read().twist[:3], 3).tolist()
[0.2, 0.0, -1.0]
"""

from __future__ import annotations

import inspect
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
        noise: float = 0.0,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if noise < 0:
            raise ValueError(f"key 'teleop.script.noise' must be >= 0, got {noise}")
        self.pos_scale, self.always, self.gain = pos_scale, always, gain
        self.noise, self._rng = float(noise), np.random.default_rng(seed)
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

    def _command(self, move: np.ndarray) -> np.ndarray:
        """The 6-D twist of a translation command (full action = 1), with the operator's noise."""
        twist = np.zeros(6)
        if self.noise > 0:
            move = move + self._rng.normal(0.0, self.noise, 3)
        twist[:3] = np.clip(move, -1, 1)
        return twist

    def read(self) -> TeleopInput:
        if self.ee is None or self.goal is None:
            return TeleopInput()
        delta = self.goal - self.ee
        twist = self._command(self.gain * delta / self.pos_scale)
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
        twist = self._command(self.gain * (self.target() - self.ee) / self.pos_scale)
        gap = float(np.linalg.norm(self.goal[:2] - self.obj[:2]))
        take = self.always or self._drifting(gap, self._clock())
        return TeleopInput(twist=twist, gripper=-1.0, intervention=take)


class ScriptedInsert(ScriptedReach):
    """A scripted human for peg insertion (``mujoco_franka/insert``): the simulator's insertion
    oracle on the poses the teleop node hears (hand, and the hole's top centre as the goal; robot
    base frame). Align the peg tip over the hole ``hover`` above it, then descend while correcting
    the lateral error; a peg caught on the rim goes back up and aligns again.

    The peg tip is ``PEG_TIP`` along the hand's tool axis from the grip site (straight down until
    the orientation is heard). Over ROS the device steers from a pose one to two control steps old
    and each action moves the target from the pose measured when it is applied, so a correction
    lands partly twice and the simulator oracle's gains (lateral 2 for an impedance arm, vertical
    1) swing the peg over the hole. Hence ``lateral_gain`` 0.6 and ``vertical_gain`` 0.5 (command
    per metre of error while aligning at hover height), descending once aligned within
    ``align_tol`` = 1.5 mm (the hole's clearance is 1 mm a side). Measured in the simulator over
    12 episodes with the pose one / two / one or two steps late: 11 / 9 / 11 insertions, against
    12 / 0 / 5 at vertical gain 1 and none at the oracle's gains two steps late. ``always:
    false`` takes over when the tip stops approaching the bottom of the insertion (drift, as
    :class:`ScriptedReach`)."""

    def __init__(
        self,
        *args: Any,
        lateral_gain: float = 0.6,
        vertical_gain: float = 0.5,
        align_tol: float = 0.0015,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        from sim_bridges.mujoco_franka.tasks import insert

        self.geometry = insert
        self.lateral_gain = float(lateral_gain)
        self.vertical_gain = float(vertical_gain)
        self.align_tol = float(align_tol)
        self.rot: np.ndarray | None = None  # the hand's orientation (base frame), once heard

    def on_orientation(self, rot: np.ndarray) -> None:
        """The hand's rotation matrix: the tip is along its tool axis (a tilt of 1 degree moves
        the tip ~1 mm, the hole's whole clearance)."""
        self.rot = np.asarray(rot, np.float64)

    def tip(self) -> np.ndarray:
        axis = np.array([0.0, 0.0, -1.0]) if self.rot is None else self.rot[:, 2]
        return self.ee + self.geometry.PEG_TIP * axis  # type: ignore[operator]  # ee set before tip()

    def delta(self) -> np.ndarray:
        """The oracle's end-effector displacement for this tick (m)."""
        hole, tip = self.goal, self.tip()
        error = hole[:2] - tip[:2]  # type: ignore[index]  # goal set before delta()
        lateral = self.lateral_gain * error
        inside = tip[2] < hole[2] - 0.002  # type: ignore[index]  # goal set before delta()
        if np.linalg.norm(error) > self.align_tol and not inside:  # (back) up to hover, align
            rise = self.vertical_gain * (hole[2] + self.geometry.HOVER - tip[2])  # type: ignore[index]  # see above
            return np.array([*lateral, rise])
        return np.array([*lateral, -0.01])

    def read(self) -> TeleopInput:
        if self.ee is None or self.goal is None:
            return TeleopInput()
        twist = self._command(self.gain * self.delta() / self.pos_scale)
        bottom = self.goal - np.array([0.0, 0.0, self.geometry.SUCCESS_DEPTH])
        take = self.always or self._drifting(
            float(np.linalg.norm(bottom - self.tip())), self._clock()
        )
        return TeleopInput(twist=twist, gripper=self.geometry.GRIP_ON_PEG, intervention=take)


# teleop.script.task -> the scripted human
SCRIPTS = {"reach": ScriptedReach, "push": ScriptedPush, "insert": ScriptedInsert}


def _make(cfg: Any, spec: Any = None, **_: Any) -> ScriptedReach:
    opts = dict(cfg.script)
    task = opts.pop("task", "reach")
    if task not in SCRIPTS:
        raise ValueError(f"key 'teleop.script.task' is {task!r}; known: {sorted(SCRIPTS)}")
    opts.setdefault("always", cfg.always_intervene)
    if spec is not None:
        opts.setdefault("pos_scale", spec.action.pos_scale)
    known = set(inspect.signature(SCRIPTS[task].__init__).parameters) | set(
        inspect.signature(ScriptedReach.__init__).parameters
    )
    unknown = sorted(set(opts) - known - {"self", "args", "kwargs", "clock"})
    if unknown:
        raise ValueError(
            f"key 'teleop.script' has unknown settings {unknown} for task {task!r}; known: "
            f"{sorted(known - {'self', 'args', 'kwargs', 'clock'})}"
        )
    return SCRIPTS[task](**opts)


DEVICES.add("scripted", _make)
