"""Offscreen camera rendering for the Franka envs.

One ``mujoco.Renderer`` per (model, height, width) is created lazily and reused for every env
and camera of that size; shadows, reflections and the skybox are off (about 3x faster on CPU
with osmesa). Per-env colours / lighting of the vision OOD split are written into the shared
model just before that env is rendered, so physics is untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import mujoco
import numpy as np

from sim_bridges.mujoco_franka.model import COLLISION_GROUP, SCENE_GROUP, VISUAL_GROUP, FrankaModel
from sim_bridges.mujoco_franka.ood import VisualState

log = logging.getLogger(__name__)

# "collision": the robot drawn with its coarse collision meshes (~5x fewer triangles than the
# visual meshes; the fast default for pixel RL on CPUs); "visual": robosuite's detailed meshes
ROBOT_LOOKS = {"collision": COLLISION_GROUP, "visual": VISUAL_GROUP}
_OFF_FLAGS = (
    mujoco.mjtRndFlag.mjRND_SHADOW,
    mujoco.mjtRndFlag.mjRND_REFLECTION,
    mujoco.mjtRndFlag.mjRND_SKYBOX,
)


def camera_option(robot_look: str = "collision") -> mujoco.MjvOption:
    """What a camera of the scene draws: the robot in ``robot_look``, the scene, and no sites.

    Why no sites: the gripper model carries visualisation sites (a red sphere at the grip point,
    a green cylinder along the approach axis) that MuJoCo draws by default. A real camera sees
    neither, and in the push scene they are the colours of the cube and the goal disc, so a
    keypoint encoder trained on such frames spends its red and green channels on the hand.
    """
    if robot_look not in ROBOT_LOOKS:
        raise ValueError(f"robot_look={robot_look!r}; use one of {sorted(ROBOT_LOOKS)}")
    option = mujoco.MjvOption()
    option.geomgroup[:] = 0
    option.geomgroup[ROBOT_LOOKS[robot_look]] = 1
    option.geomgroup[SCENE_GROUP] = 1
    option.sitegroup[:] = 0
    return option


def camera_id(fm: FrankaModel, name: str) -> int:
    cid = fm.camera_ids.get(name, -1)
    if cid < 0:
        raise ValueError(f"unknown camera {name!r}; cameras of this scene: {sorted(fm.camera_ids)}")
    return cid


class CameraRig:
    """Renders named cameras of many MjData into preallocated uint8 arrays."""

    def __init__(self, height: int, width: int, robot_look: str = "collision") -> None:
        self.height, self.width = height, width
        self.option = camera_option(robot_look)
        self._renderers: dict[int, mujoco.Renderer] = {}

    def _renderer(self, fm: FrankaModel) -> mujoco.Renderer:
        key = id(fm.model)
        if key not in self._renderers:
            r = mujoco.Renderer(fm.model, self.height, self.width)
            for flag in _OFF_FLAGS:
                r.scene.flags[flag] = False
            self._renderers[key] = r
        return self._renderers[key]

    def _apply_visuals(self, fm: FrankaModel, vis: VisualState | None) -> None:
        m = fm.model
        rgba, diffuse, ambient = fm.base_visuals
        m.geom_rgba[:] = rgba
        m.light_diffuse[:] = diffuse
        m.light_ambient[:] = ambient
        if vis is None:
            return
        if vis.object_rgba is not None:
            for gid in fm.object_geoms.values():
                m.geom_rgba[gid] = vis.object_rgba
        if vis.table_rgba is not None:
            m.geom_rgba[fm.table_geom] = vis.table_rgba
        m.light_diffuse[:] = np.clip(diffuse * vis.light_scale, 0.0, 1.0)
        m.light_ambient[:] = np.clip(ambient * vis.light_scale, 0.0, 1.0)

    def render(
        self,
        fms: Sequence[FrankaModel],
        datas: Sequence[mujoco.MjData],
        camera: str,
        visuals: Sequence[VisualState | None] | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Frames ``[B, H, W, 3]`` of ``camera`` for every (model, data) pair."""
        if out is None:
            out = np.empty((len(datas), self.height, self.width, 3), dtype=np.uint8)
        for i, (fm, d) in enumerate(zip(fms, datas)):
            r = self._renderer(fm)
            self._apply_visuals(fm, visuals[i] if visuals else None)
            r.update_scene(d, camera=camera_id(fm, camera), scene_option=self.option)
            r.render(out=out[i])
        return out

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
