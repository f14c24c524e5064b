"""Two arms as one robot, with ``left_`` / ``right_`` naming and one flat joint layout.

Layout of the flat state / command vector (ALOHA-style, per arm: joints then gripper)::

    [left joint 1..n, left gripper width, right joint 1..n, right gripper width]

n = 7 for Franka arms (16 entries), n = 6 for 6-DoF arms (the 14-dim ALOHA layout). Gripper
entries are opening widths in metres. Each arm keeps its own safety layer; an e-stop on the
pair latches both.

Why in tests: the ROS robot node drives a list of arms itself (``rlinf_ros.nodes.robot``); this
composition is what the driver tests check the two-arm naming and layout with.
"""

from __future__ import annotations

import numpy as np

from robot_drivers.arm import FrankaArm
from robot_drivers.types import CommandOutcome


class DualArm:
    """Composition of a left and a right :class:`FrankaArm` (prefixes must differ)."""

    SIDES = ("left", "right")

    def __init__(self, left: FrankaArm, right: FrankaArm) -> None:
        if left.joint_prefix == right.joint_prefix:
            raise ValueError(
                f"both arms use joint_prefix {left.joint_prefix!r}; use e.g. 'left_panda_' / "
                "'right_panda_' so joint names stay unique"
            )
        self.arms = {"left": left, "right": right}

    @property
    def dof(self) -> int:
        """Entries of the flat vector: (joints + 1 gripper) per arm."""
        return sum(a.backend.dof + 1 for a in self.arms.values())

    @property
    def names(self) -> list[str]:
        """Entry names of the flat vector, e.g. ``left_panda_joint1 .. left_gripper ..``."""
        out = []
        for side, arm in self.arms.items():
            out += arm.joint_names + [f"{side}_gripper"]
        return out

    def connect(self) -> None:
        for a in self.arms.values():
            a.connect()

    def disconnect(self) -> None:
        for a in self.arms.values():
            a.disconnect()

    def state_vector(self) -> np.ndarray:
        parts = []
        for arm in self.arms.values():
            st = arm.state()
            parts += [st.q, [st.gripper.width]]
        return np.concatenate(parts).astype(np.float64)

    def split(self, vec: np.ndarray) -> dict[str, tuple[np.ndarray, float]]:
        """Flat vector -> {side: (joints, gripper)}; a wrong length names the expected layout."""
        vec = np.asarray(vec, dtype=np.float64)
        if vec.shape != (self.dof,):
            raise ValueError(
                f"dual-arm vector must have {self.dof} entries {self.names}, got shape {vec.shape}"
            )
        out, i = {}, 0
        for side, arm in self.arms.items():
            n = arm.backend.dof
            out[side] = (vec[i : i + n], float(vec[i + n]))
            i += n + 1
        return out

    def move_joints(self, vec: np.ndarray) -> dict[str, CommandOutcome]:
        """Joint + gripper targets for both arms (each through its own safety layer)."""
        outs = {}
        for side, (q, width) in self.split(vec).items():
            arm = self.arms[side]
            outs[side] = arm.move_joints(q)
            if not outs[side].refused:
                arm.gripper_move(width)
        return outs

    def tick(self, now: float | None = None) -> None:
        for a in self.arms.values():
            a.tick(now)

    def estop(self, reason: str = "requested") -> None:
        for a in self.arms.values():
            a.estop(reason)

    def reset_estop(self) -> None:
        for a in self.arms.values():
            a.reset_estop()

    def recover(self) -> bool:
        return all([a.recover() for a in self.arms.values()])
