"""Keyboard teleop in a terminal (no X): raw stdin through ``termios`` / ``select``.

Keys (a terminal sends no key-up events, so a motion key moves for ``hold_s`` after each press;
the key's auto-repeat keeps it going): ``w/s`` +x/-x, ``a/d`` +y/-y, ``r/f`` +z/-z,
``i/k`` ``j/l`` ``u/o`` rotations about x / y / z, ``c`` close and ``v`` open the gripper,
``space`` toggles the intervention flag (take over / hand back), ``y`` success, ``n`` failure,
``x`` re-record.

>>> import io
>>> kb = Keyboard(stream=io.StringIO("w c y"), clock=lambda: 0.0)
>>> inp = kb.read()
>>> inp.twist.tolist()[:3], inp.gripper, inp.events, inp.intervention
([1.0, 0.0, 0.0], -1.0, ['success'], True)
"""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

from rlinf_ros.teleop.base import DEVICES, TeleopInput

MOTION = {
    "w": (0, 1),
    "s": (0, -1),
    "a": (1, 1),
    "d": (1, -1),
    "r": (2, 1),
    "f": (2, -1),
    "i": (3, 1),
    "k": (3, -1),
    "j": (4, 1),
    "l": (4, -1),
    "u": (5, 1),
    "o": (5, -1),
}
EVENT_KEYS = {"y": "success", "n": "failure", "x": "rerecord"}


class Keyboard:
    def __init__(
        self,
        stream: TextIO | None = None,
        hold_s: float = 0.15,
        speed: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stdin
        self.hold_s, self.speed, self._clock = hold_s, speed, clock
        self._until = np.full(6, -np.inf)
        self._dir = np.zeros(6)
        self.intervention = False
        self._saved: Any = None
        if stream is None and sys.stdin.isatty():
            import termios
            import tty

            self._saved = termios.tcgetattr(sys.stdin.fileno())
            tty.setcbreak(
                sys.stdin.fileno()
            )  # keys arrive one by one, unechoed; Ctrl-C still works

    def _keys(self) -> str:
        if hasattr(self.stream, "fileno"):
            try:
                fd = self.stream.fileno()
            except (OSError, ValueError):  # an in-memory stream (tests)
                return self.stream.read()
            if not select.select([fd], [], [], 0)[0]:
                return ""
            return os.read(fd, 64).decode(errors="ignore")
        return self.stream.read()

    def read(self) -> TeleopInput:
        now, gripper, events = self._clock(), None, []
        for key in self._keys().lower():
            if key in MOTION:
                axis, sign = MOTION[key]
                self._dir[axis], self._until[axis] = sign, now + self.hold_s
            elif key in ("c", "v"):
                gripper = -1.0 if key == "c" else 1.0
            elif key == " ":
                self.intervention = not self.intervention
            elif key in EVENT_KEYS:
                events.append(EVENT_KEYS[key])
        twist = np.where(self._until >= now, self._dir, 0.0) * self.speed
        if twist.any() or gripper is not None:
            self.intervention = True  # moving is taking over
        return TeleopInput(
            twist=twist, gripper=gripper, intervention=self.intervention, events=events
        )

    def close(self) -> None:
        if self._saved is not None:
            import termios

            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._saved)


DEVICES.add("keyboard", lambda cfg, **_: Keyboard(speed=cfg.pos_speed))
