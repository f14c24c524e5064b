"""Lift (pick): grasp the cube and raise it 10 cm above the table.

Dense reward: a per-step *cost* that only success removes (the env adds 1 on success, and the
episode ends there by default)::

    r = -( |ee - obj| + 0.5 (1 - grasped) + 0.5 (1 - min(height / 0.10, 1)) )

Every stage lowers the cost (reach, then grasp, then lift), yet every stage short of success
still costs at least 0.5 per step, so no behaviour that stops short of lifting (hovering at
the cube with open fingers, holding it on the table) out-scores lifting it. A positive
per-stage bonus would be paid for lingering and is exactly what went wrong before: the old
``+0.5`` grasp bonus with a 3 cm / 7.5 cm-width test paid hovering with open fingers (the
gripper opens to 8 cm, the cube is 4 cm) 38 per episode against 7 for lifting.

``grasped`` is a real grasp: the object centre within 2 cm of the grip site *and* the fingers
blocked by it, i.e. commanded to close at least 1 cm further than they are (finger targets
``d.ctrl``) while still more than 1 cm apart (closing on air ends at ~2 mm).
"""

from __future__ import annotations

import mujoco
import numpy as np

from rlinf_contracts.spec import StateField
from sim_bridges.mujoco_franka.model import FrankaModel
from sim_bridges.mujoco_franka.tasks.base import (
    FrankaTask,
    Workspace,
    body_pos,
    gripper_width,
    object_rest_z,
    register_task,
)

OBJECT_BOX = Workspace(center=(-0.08, 0.0, 0.0), half=(0.08, 0.12, 0.0))
LIFT_HEIGHT = 0.10
GRASP_RADIUS = 0.02  # object centre to grip site
GRASP_BLOCKED = 0.01  # commanded finger width at least this much below the actual width
GRASP_MIN_WIDTH = 0.01  # fingers closed on nothing end at ~0.002
STAGE_COST = 0.5  # per step, for not grasping and (scaled by the height missing) not lifting


def lift_reward(
    dist: np.ndarray, height: np.ndarray, width: np.ndarray, target_width: np.ndarray
) -> np.ndarray:
    """Dense lift reward of ``n`` states (see the module docstring); all inputs ``[n]``."""
    grasped = (
        (dist < GRASP_RADIUS) & (width > GRASP_MIN_WIDTH) & (target_width < width - GRASP_BLOCKED)
    )
    lifted = np.clip(height / LIFT_HEIGHT, 0.0, 1.0)
    return -(dist + STAGE_COST * (1.0 - grasped) + STAGE_COST * (1.0 - lifted))


def _finger_targets(fm: FrankaModel, d: mujoco.MjData) -> np.ndarray:
    """View of the two finger position targets (``d.ctrl``, contiguous actuators)."""
    a = int(fm.grip_act[0])
    if int(fm.grip_act[1]) != a + 1:
        raise ValueError(
            f"finger actuators {fm.grip_act.tolist()} are not adjacent; lift needs a ctrl view"
        )
    return d.ctrl[a : a + 2]


@register_task("lift")
class LiftTask(FrankaTask):
    instruction = "pick up the cube"
    state_fields = (
        StateField("object_pos", 3),
        StateField("object_minus_ee", 3),
        StateField("object_height", 1),
    )
    feature_dim = 7
    needs_object = True
    default_control = "ee_delta"
    default_max_steps = 80

    def reset(self, fm: FrankaModel, d: mujoco.MjData, rng: np.random.Generator) -> None:
        self.place_object(fm, d, rng, OBJECT_BOX, max_yaw=np.pi / 4)

    def features(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        obj = body_pos(fm, d, "object")
        return np.concatenate([obj, obj - ee, [obj[2] - object_rest_z(fm)]])

    def evaluate(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> tuple[bool, float]:
        obj = body_pos(fm, d, "object")
        height = float(obj[2] - object_rest_z(fm))
        targets = _finger_targets(fm, d)
        reward = lift_reward(
            np.array([np.linalg.norm(obj - ee)]),
            np.array([height]),
            np.array([gripper_width(fm, d)]),
            np.array([targets[0] - targets[1]]),
        )
        return height > LIFT_HEIGHT, float(reward[0])

    raw_dim = 5  # object position, finger targets

    def raw_views(self, fm: FrankaModel, d: mujoco.MjData) -> tuple[np.ndarray, ...]:
        return body_pos(fm, d, "object"), _finger_targets(fm, d)

    def raw_const(self, fm: FrankaModel) -> float:
        return object_rest_z(fm)

    def batch_features(self, ee: np.ndarray, raw: np.ndarray, const: np.ndarray) -> np.ndarray:
        obj = raw[:, :3]
        return np.concatenate([obj, obj - ee, (obj[:, 2] - const)[:, None]], axis=1)

    def batch_evaluate(
        self, ee: np.ndarray, raw: np.ndarray, width: np.ndarray, const: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        height = raw[:, 2] - const
        dist = np.linalg.norm(raw[:, :3] - ee, axis=1)
        return height > LIFT_HEIGHT, lift_reward(dist, height, width, raw[:, 3] - raw[:, 4])

    def oracle(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        obj = body_pos(fm, d, "object")
        width = gripper_width(fm, d)
        near = np.linalg.norm(obj - ee) < 0.015
        if near and width < 0.05:  # holding it: lift
            target, grip = obj + np.array([0.0, 0.0, 0.15]), -1.0
        elif near:  # at the object: close
            target, grip = obj, -1.0
        elif np.linalg.norm(obj[:2] - ee[:2]) > 0.01:
            target, grip = obj + np.array([0.0, 0.0, 0.08]), 1.0
        else:
            target, grip = obj, 1.0
        return np.concatenate([target - ee, [grip]])
