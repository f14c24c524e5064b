"""Lift (pick): grasp the cube and raise it 10 cm above the table.

Dense reward (staged, like robosuite's Lift): ``-|ee - obj|`` for reaching, ``+0.5`` while the
object is between the closed fingers, ``+5 * height gained`` (capped at the success height),
plus 1 on success.
"""

from __future__ import annotations

import mujoco
import numpy as np

from rlinf_contracts.spec import StateField
from sim_bridges.mujoco_franka.model import FrankaModel
from sim_bridges.mujoco_franka.tasks.base import (
    FrankaTask, Workspace, body_pos, gripper_width, object_rest_z, register_task,
)

OBJECT_BOX = Workspace(center=(-0.08, 0.0, 0.0), half=(0.08, 0.12, 0.0))
LIFT_HEIGHT = 0.10


@register_task("lift")
class LiftTask(FrankaTask):
    instruction = "pick up the cube"
    state_fields = (StateField("object_pos", 3), StateField("object_minus_ee", 3), StateField("object_height", 1))
    feature_dim = 7
    needs_object = True
    default_control = "ee_delta"
    default_max_steps = 80

    def reset(self, fm: FrankaModel, d: mujoco.MjData, rng: np.random.Generator) -> None:
        obj = self.place_object(fm, d, rng, OBJECT_BOX, max_yaw=np.pi / 4)

    def features(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        obj = body_pos(fm, d, "object")
        return np.concatenate([obj, obj - ee, [obj[2] - object_rest_z(fm)]])

    def _grasped(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> bool:
        obj = body_pos(fm, d, "object")
        return np.linalg.norm(obj - ee) < 0.03 and gripper_width(fm, d) < 0.075

    def evaluate(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> tuple[bool, float]:
        obj = body_pos(fm, d, "object")
        height = float(obj[2] - object_rest_z(fm))
        success = height > LIFT_HEIGHT
        reward = -float(np.linalg.norm(obj - ee))
        if self._grasped(fm, d, ee):
            reward += 0.5 + 5.0 * min(max(height, 0.0), LIFT_HEIGHT)
        return success, reward

    raw_dim = 3  # object position

    def raw_views(self, fm: FrankaModel, d: mujoco.MjData) -> tuple[np.ndarray, ...]:
        return (body_pos(fm, d, "object"),)

    def raw_const(self, fm: FrankaModel) -> float:
        return object_rest_z(fm)

    def batch_features(self, ee: np.ndarray, raw: np.ndarray, const: np.ndarray) -> np.ndarray:
        return np.concatenate([raw, raw - ee, (raw[:, 2] - const)[:, None]], axis=1)

    def batch_evaluate(self, ee: np.ndarray, raw: np.ndarray, width: np.ndarray,
                       const: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        height = raw[:, 2] - const
        dist = np.linalg.norm(raw - ee, axis=1)
        grasped = (dist < 0.03) & (width < 0.075)
        bonus = 0.5 + 5.0 * np.clip(height, 0.0, LIFT_HEIGHT)
        return height > LIFT_HEIGHT, -dist + np.where(grasped, bonus, 0.0)

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
