"""The robot reading a policy client would build from a twin arm's own state (joint state, hand
pose, gripper) plus the task's topics: the scene-twin tests compare its state with the
simulator's observation of the same MuJoCo state."""

from __future__ import annotations

from typing import Any

from rlinf_contracts.features import RobotReading
from rlinf_contracts.rotations import quat_xyzw_to_matrix


def arm_reading(arm: Any, **task_topics: Any) -> RobotReading:
    """``arm.state()`` as the client reads it, with ``task_topics`` (``goal_pos``, ...)."""
    s = arm.state()
    return RobotReading(
        q=s.q,
        dq=s.dq,
        ee_pos=s.ee_pose.position,
        ee_rot=quat_xyzw_to_matrix(s.ee_pose.quat_xyzw),
        gripper_width=s.gripper.width,
        **task_topics,
    )
