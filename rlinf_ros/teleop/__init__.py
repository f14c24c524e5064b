"""Teleop devices behind one interface (``rlinf_ros.teleop.base``): keyboard, SpaceMouse,
gamepad, leader arm, scripted. Each reads a :class:`~rlinf_ros.teleop.base.TeleopInput`;
:func:`~rlinf_ros.teleop.base.to_action` maps it into the robot spec's action space."""

from rlinf_ros.teleop.base import DEVICES, TeleopDevice, TeleopInput, make_device, to_action

__all__ = ["DEVICES", "TeleopDevice", "TeleopInput", "make_device", "to_action"]
