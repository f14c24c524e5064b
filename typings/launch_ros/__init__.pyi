# ROS 2 launch (a ROS install, not a pip package; also shadowed by this repo's launch/ files).
from typing import Any

def __getattr__(name: str) -> Any: ...
