"""Leader arm: a second arm (or a kinesthetic device) whose joints the follower mirrors.

The teleop node feeds each ``sensor_msgs/JointState`` of ``leader_topic`` to
:meth:`LeaderArm.on_joints`; ``read`` gives those joints as absolute targets (the spec's
``joint_position`` action, or ``joint_delta`` toward them). The leader's gripper joint, when
present, sets the gripper. While the leader is moving (above ``move_threshold`` rad since the last
read) the human intervenes.
"""

from __future__ import annotations

import numpy as np

from rlinf_ros.teleop.base import DEVICES, TeleopInput


class LeaderArm:
    def __init__(self, move_threshold: float = 0.002, max_width: float = 0.08) -> None:
        self.q: np.ndarray | None = None
        self.width: float | None = None
        self._last: np.ndarray | None = None
        self.move_threshold, self.max_width = move_threshold, max_width

    def on_joints(self, q: np.ndarray, gripper_width: float | None = None) -> None:
        self.q = np.asarray(q, np.float64)
        self.width = gripper_width

    def read(self) -> TeleopInput:
        if self.q is None:
            return TeleopInput()
        moving = (
            self._last is not None
            and float(np.max(np.abs(self.q - self._last))) > self.move_threshold
        )
        self._last = self.q.copy()
        grip = None if self.width is None else 2.0 * self.width / self.max_width - 1.0
        return TeleopInput(joints=self.q.copy(), gripper=grip, intervention=moving)

    def close(self) -> None:
        pass


DEVICES.add("leader", lambda cfg, **_: LeaderArm())
