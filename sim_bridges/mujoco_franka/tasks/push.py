"""Push: slide a cube on the table to a goal marker (success: within 5 cm in the plane).

Dense reward: reach the object, then move it toward the goal:
``-|ee - obj| - 2 |obj_xy - goal_xy|`` (plus 1 on success).
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
    object_rest_z,
    register_task,
)

OBJECT_BOX = Workspace(center=(-0.08, 0.0, 0.0), half=(0.06, 0.12, 0.0))
GOAL_OFFSET = Workspace(center=(0.0, 0.0, 0.0), half=(0.12, 0.12, 0.0))


@register_task("push")
class PushTask(FrankaTask):
    instruction = "push the cube to the green marker"
    markers = ("goal",)
    # the goal is the success region, drawn on the table: the cube must end inside the disc, and
    # a camera-only policy sees where that is from either camera (a bench marks it the same way)
    marker_discs = (("goal", 0.05),)
    state_fields = (
        StateField("object_pos", 3),
        StateField("object_minus_ee", 3),
        StateField("goal_pos", 3),
        StateField("goal_minus_object", 3),
    )
    feature_dim = 12
    needs_object = True
    default_control = "ee_delta"
    default_max_steps = 80

    def reset(self, fm: FrankaModel, d: mujoco.MjData, rng: np.random.Generator) -> None:
        obj = self.place_object(fm, d, rng, OBJECT_BOX, max_yaw=np.pi)
        while True:  # goal at least 10 cm away so a do-nothing policy never succeeds
            off = GOAL_OFFSET.sample(rng, self.pos_scale)
            if np.linalg.norm(off[:2]) > 0.1:
                break
        goal = obj + off
        goal[2] = object_rest_z(fm) - 0.015
        d.mocap_pos[fm.marker_mocap["goal"]] = goal

    def features(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        obj = body_pos(fm, d, "object")
        goal = d.mocap_pos[fm.marker_mocap["goal"]]
        return np.concatenate([obj, obj - ee, goal, goal - obj])

    def _goal_dist(self, fm: FrankaModel, d: mujoco.MjData) -> float:
        obj = body_pos(fm, d, "object")
        return float(np.linalg.norm(d.mocap_pos[fm.marker_mocap["goal"]][:2] - obj[:2]))

    def evaluate(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> tuple[bool, float]:
        reach = float(np.linalg.norm(body_pos(fm, d, "object") - ee))
        goal = self._goal_dist(fm, d)
        return goal < self.success_radius, -reach - 2.0 * goal

    raw_dim = 6  # object position, goal position

    def raw_views(self, fm: FrankaModel, d: mujoco.MjData) -> tuple[np.ndarray, ...]:
        return body_pos(fm, d, "object"), d.mocap_pos[fm.marker_mocap["goal"]]

    def batch_features(self, ee: np.ndarray, raw: np.ndarray, const: np.ndarray) -> np.ndarray:
        obj, goal = raw[:, :3], raw[:, 3:6]
        return np.concatenate([obj, obj - ee, goal, goal - obj], axis=1)

    def batch_evaluate(
        self, ee: np.ndarray, raw: np.ndarray, width: np.ndarray, const: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        reach = np.linalg.norm(raw[:, :3] - ee, axis=1)
        goal = np.linalg.norm(raw[:, 3:5] - raw[:, :2], axis=1)
        return goal < self.success_radius, -reach - 2.0 * goal

    def oracle(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        obj = body_pos(fm, d, "object").copy()
        goal = d.mocap_pos[fm.marker_mocap["goal"]]
        direction = goal[:2] - obj[:2]
        direction /= max(np.linalg.norm(direction), 1e-6)
        pre = obj.copy()
        pre[:2] -= direction * 0.06
        rel = obj[:2] - ee[:2]
        along = float(rel @ direction)
        lateral = float(np.linalg.norm(rel - along * direction))
        low = obj[2] + 0.005
        if 0.02 < along < 0.09 and lateral < 0.02 and abs(ee[2] - low) < 0.02:
            target = np.array([*(obj[:2] + direction * 0.05), low])  # pushing
        elif np.linalg.norm(ee[:2] - pre[:2]) > 0.015:
            target = np.array([*pre[:2], obj[2] + 0.08])  # hover behind the object
        else:
            target = np.array([*pre[:2], low])  # descend behind it
        return np.concatenate([target - ee, [-1.0]])
