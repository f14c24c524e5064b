# optional SpaceMouse teleop backend (rlinf_ros/teleop/spacemouse.py); its API is Any here.
from typing import Any

def __getattr__(name: str) -> Any: ...
