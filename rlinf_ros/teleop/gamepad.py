"""Gamepad (Xbox / PlayStation layout) through ``pygame`` (the ``teleop`` extra).

Left stick: x / y; right stick: z and yaw; d-pad: roll / pitch; LB held: intervention;
RB: toggle the gripper; A success, B failure, X re-record. ``SDL_VIDEODRIVER=dummy`` is set so
it runs headless (no window is opened); tests use SDL's dummy joystick-less driver and a fake stick.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from rlinf_ros.teleop.base import DEVICES, TeleopInput

BUTTON_EVENTS = {0: "success", 1: "failure", 2: "rerecord"}  # A, B, X
LB, RB = 4, 5


class Gamepad:
    def __init__(self, speed: float = 1.0, deadband: float = 0.1, joystick: Any = None) -> None:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        try:
            import pygame
        except ImportError as e:
            raise RuntimeError("device 'gamepad' needs pygame: pip install -e .[teleop]") from e
        self._pg = pygame
        pygame.init()
        pygame.joystick.init()
        if joystick is None:
            if pygame.joystick.get_count() == 0:
                raise RuntimeError(
                    "no gamepad found by SDL (plugged in? permissions on /dev/input/js*?)"
                )
            joystick = pygame.joystick.Joystick(0)
        self.js, self.speed, self.deadband = joystick, speed, deadband
        self._open, self._prev = 1.0, [False] * 16

    def _pressed(self, i: int) -> bool:
        """True on the tick a button goes down."""
        down = bool(self.js.get_button(i)) if i < self.js.get_numbuttons() else False
        rose = down and not self._prev[i]
        self._prev[i] = down
        return rose

    def read(self) -> TeleopInput:
        self._pg.event.pump()
        ax = [self.js.get_axis(i) if i < self.js.get_numaxes() else 0.0 for i in range(4)]
        hat = self.js.get_hat(0) if self.js.get_numhats() else (0, 0)
        twist = np.array([-ax[1], -ax[0], -ax[3], hat[0], hat[1], ax[2]]) * self.speed
        twist = np.where(np.abs(twist) < self.deadband, 0.0, np.clip(twist, -1, 1))
        if self._pressed(RB):
            self._open = -self._open
        events = [name for i, name in BUTTON_EVENTS.items() if self._pressed(i)]
        held = bool(self.js.get_button(LB)) if LB < self.js.get_numbuttons() else False
        return TeleopInput(twist=twist, gripper=self._open, intervention=held, events=events)

    def close(self) -> None:
        self._pg.quit()


DEVICES.add("gamepad", lambda cfg, **_: Gamepad(cfg.pos_speed))
