"""3Dconnexion SpaceMouse through ``pyspacemouse`` (over ``hidapi``; the ``teleop`` extra).

Axes -> twist (x, y, z, roll, pitch, yaw, each in [-1, 1]); left button held = intervention,
right button toggles the gripper. Needs read access to the HID device (a udev rule on Linux).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlinf_ros.teleop.base import DEVICES, TeleopInput


class SpaceMouse:
    def __init__(
        self,
        pos_speed: float = 1.0,
        rot_speed: float = 1.0,
        deadband: float = 0.05,
        backend: Any = None,
    ) -> None:
        if backend is None:
            try:
                import pyspacemouse
            except ImportError as e:
                raise RuntimeError(
                    "device 'spacemouse' needs pyspacemouse + hidapi: pip install -e .[teleop]"
                ) from e
            if not pyspacemouse.open():
                raise RuntimeError(
                    "no SpaceMouse found (plugged in? udev rule giving read access to "
                    "/dev/hidraw*?)"
                )
            backend = pyspacemouse
        self.backend, self.pos_speed, self.rot_speed, self.deadband = (
            backend,
            pos_speed,
            rot_speed,
            deadband,
        )
        self._open, self._last_right = 1.0, False

    def read(self) -> TeleopInput:
        s = self.backend.read()
        twist = np.array(
            [
                s.x * self.pos_speed,
                s.y * self.pos_speed,
                s.z * self.pos_speed,
                s.roll * self.rot_speed,
                s.pitch * self.rot_speed,
                -s.yaw * self.rot_speed,
            ]
        )
        twist = np.where(np.abs(twist) < self.deadband, 0.0, np.clip(twist, -1, 1))
        buttons = list(getattr(s, "buttons", [0, 0])) + [0, 0]
        right = bool(buttons[1])
        if right and not self._last_right:
            self._open = -self._open
        self._last_right = right
        return TeleopInput(twist=twist, gripper=self._open, intervention=bool(buttons[0]))

    def close(self) -> None:
        close = getattr(self.backend, "close", None)
        if callable(close):
            close()


DEVICES.add("spacemouse", lambda cfg, **_: SpaceMouse(cfg.pos_speed, cfg.rot_speed))
