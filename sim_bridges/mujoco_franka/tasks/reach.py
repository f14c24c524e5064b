"""Reach: move the gripper site to a random target in the air above the table.

Tuned to be learnable in minutes by PPO with an MLP: the state carries the target and the
target-minus-EE vector, the dense reward is ``-distance`` (plus 1 on success), and success is
within ``success_radius`` (5 cm), which ends the episode by default.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from rlinf_contracts.spec import StateField
from sim_bridges.mujoco_franka.model import TABLE_HEIGHT, FrankaModel
from sim_bridges.mujoco_franka.tasks.base import FrankaTask, Workspace, register_task

TARGET_BOX = Workspace(center=(-0.05, 0.0, TABLE_HEIGHT + 0.2), half=(0.15, 0.2, 0.12))


@register_task("reach")
class ReachTask(FrankaTask):
    instruction = "move the gripper to the green target"
    markers = ("target",)
    state_fields = (StateField("goal_pos", 3), StateField("goal_minus_ee", 3))
    feature_dim = 6
    default_max_steps = 50

    def reset(self, fm: FrankaModel, d: mujoco.MjData, rng: np.random.Generator) -> None:
        d.mocap_pos[fm.marker_mocap["target"]] = TARGET_BOX.sample(
            rng, self.pos_scale, self.pos_shift
        )

    def _target(self, fm: FrankaModel, d: mujoco.MjData) -> np.ndarray:
        return d.mocap_pos[fm.marker_mocap["target"]]

    def features(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        tgt = self._target(fm, d)
        return np.concatenate([tgt, tgt - ee])

    def evaluate(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> tuple[bool, float]:
        diff = self._target(fm, d) - ee
        dist = math.sqrt(float(diff @ diff))  # np.linalg.norm costs ~3x more on 3-vectors
        return dist < self.success_radius, -dist

    raw_dim = 3

    def raw_views(self, fm: FrankaModel, d: mujoco.MjData) -> tuple[np.ndarray, ...]:
        return (d.mocap_pos[fm.marker_mocap["target"]],)

    def batch_features(self, ee: np.ndarray, raw: np.ndarray, const: np.ndarray) -> np.ndarray:
        return np.concatenate([raw, raw - ee], axis=1)

    def batch_evaluate(
        self, ee: np.ndarray, raw: np.ndarray, width: np.ndarray, const: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        diff = raw - ee
        dist = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        return dist < self.success_radius, -dist

    def oracle(self, fm: FrankaModel, d: mujoco.MjData, ee: np.ndarray) -> np.ndarray:
        return np.concatenate([self._target(fm, d) - ee, [1.0]])
