"""A fake Franka Hand for the gripper worker's tests, opened in the worker process by import path
(``tests.robot_drivers.fake_gripper:FakeGripper``): a spawned process imports what it uses.

Its "IP" is a journal file: every call is appended as a line (``move 0.02``), so the test, in
another process, sees which commands ran and in what order. Motions take real time (width change
/ speed) and, like pylibfranka's, block without letting other threads of the process run
(they hold the GIL: a busy loop, not a sleep). ``move`` to a negative width fails the way a
real width out of range does; ``grasp`` with force 666 ends the process (a crash mid-motion);
an IP ending in ``.refuse`` is a hand that does not answer.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace


class CommandException(Exception):
    pass


class NetworkException(Exception):
    pass


def _hold_gil(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


class FakeGripper:
    def __init__(self, ip: str) -> None:
        if ip.endswith(".refuse"):
            raise NetworkException(f"no gripper at {ip}")
        self.journal = Path(ip)
        self.width = 0.04
        self.log("open")

    def log(self, line: str) -> None:
        with self.journal.open("a") as f:
            f.write(line + "\n")

    def read_once(self) -> SimpleNamespace:
        return SimpleNamespace(width=self.width, max_width=0.08, is_grasped=False, temperature=31)

    def _go(self, width: float, speed: float) -> None:
        _hold_gil(abs(width - self.width) / speed)
        self.width = width

    def move(self, width: float, speed: float) -> bool:
        self.log(f"move {width:g}")
        if width < 0.0:
            raise CommandException("width out of range")
        self._go(width, speed)
        return True

    def grasp(self, width: float, speed: float, force: float, ei: float, eo: float) -> bool:
        self.log(f"grasp {width:g}")
        if force == 666:
            os._exit(9)
        self._go(width, speed)
        return False  # nothing between the fingers

    def homing(self) -> bool:
        self.log("homing")
        self._go(0.08, 0.2)
        return True

    def stop(self) -> bool:
        self.log("stop")
        return True
