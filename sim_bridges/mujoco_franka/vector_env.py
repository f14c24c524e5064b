"""``FrankaVectorEnv``: B MuJoCo Franka envs stepped in one process (see ``sim_bridges.contract``).

Why a Python loop over ``MjData`` with shared ``MjModel``s: each control step is one C call
(``mj_step`` with ``nstep=substeps``) per env, the controller math is batched with numpy, and
there is no process or thread hop, so per-step overhead stays small next to the physics.
Parallelism across cores comes from running several env workers, not from this class.

State vector (float32): ``ee_pos(3) ee_rot6d(6) q(7) dq(7) gripper_width(1)`` then the task's
features (reach: ``target(3) target-ee(3)``; push: ``obj, obj-ee, goal, goal-obj``; lift:
``obj, obj-ee, height``).
"""

from __future__ import annotations

import logging
from typing import Any

import mujoco
import numpy as np

from sim_bridges.contract import EnvSpec, Observation, StepResult, VectorEnv, check_actions
from sim_bridges.mujoco_franka.config import FrankaEnvConfig
from sim_bridges.mujoco_franka.control import ACTION_DIMS, ControlConfig, arm_targets, gripper_ctrl
from sim_bridges.mujoco_franka.model import HOME_QPOS, FrankaModel, SceneOptions, compile_scene
from sim_bridges.mujoco_franka.ood import VisualState, sample_visuals
from sim_bridges.mujoco_franka.render import CameraRig
from sim_bridges.mujoco_franka.tasks import FrankaTask, get_task

log = logging.getLogger(__name__)
ROBOT_STATE_DIM = 24
_MODEL_CACHE: dict[tuple, FrankaModel] = {}


def cached_model(options: SceneOptions) -> FrankaModel:
    """Compile each distinct scene once per process (compiling takes ~0.1 s)."""
    key = (options.objects, options.markers, options.timestep, options.table_rgba)
    if key not in _MODEL_CACHE:
        _MODEL_CACHE[key] = compile_scene(options)
    return _MODEL_CACHE[key]


class FrankaVectorEnv(VectorEnv):
    """The embedded default simulator: Franka Panda reach / push / lift on a table."""

    def __init__(self, cfg: FrankaEnvConfig) -> None:
        self.cfg = cfg
        task_cls = get_task(cfg.task)
        self.task: FrankaTask = task_cls(pos_scale=cfg.ood.pos_scale, pos_shift=cfg.ood.pos_shift)
        self.control = ControlConfig(mode=cfg.control or self.task.default_control)
        dt, self.substeps = cfg.timing()
        shapes = cfg.ood.object_shapes if self.task.needs_object else ("box",)
        self.fms: list[FrankaModel] = []
        for i in range(cfg.num_envs):
            opts = SceneOptions(objects=self.task.objects(shapes[i % len(shapes)]),
                                markers=self.task.markers, timestep=dt)
            self.fms.append(cached_model(opts))
        self.datas = [mujoco.MjData(fm.model) for fm in self.fms]
        self.max_steps = cfg.max_episode_steps or self.task.default_max_steps
        h, w = cfg.image_hw
        self.spec = EnvSpec(
            num_envs=cfg.num_envs,
            state_dim=ROBOT_STATE_DIM + self.task.feature_dim,
            action_dim=ACTION_DIMS[self.control.mode],
            cameras={c: (h, w) for c in cfg.cameras} if cfg.uses_images else {},
            max_episode_steps=self.max_steps,
            control_hz=cfg.control_hz,
            instruction=self.task.instruction,
        )
        self._rig = CameraRig(h, w, cfg.robot_look) if cfg.uses_images else None
        self._video_rig: CameraRig | None = None
        if self._rig:  # fail now, not on the first step, on a bad camera name
            from sim_bridges.mujoco_franka.render import camera_id
            for cam in cfg.cameras:
                camera_id(self.fms[0], cam)
        b = cfg.num_envs
        self._rngs = [np.random.default_rng(None) for _ in range(b)]
        self._target_rot = np.zeros((b, 3, 3))
        self._visuals: list[VisualState | None] = [None] * b
        self._steps = np.zeros(b, dtype=np.int64)
        self._returns = np.zeros(b, dtype=np.float64)
        self._ever_success = np.zeros(b, dtype=bool)
        self._needs_reset = True

    # ----------------------------------------------------------------- reset
    def reset(self, seed: int | None = None) -> Observation:
        seed = self.cfg.seed if seed is None and self._needs_reset else seed
        if seed is not None:
            self._rngs = [np.random.default_rng(seed + i) for i in range(self.num_envs)]
        for i in range(self.num_envs):
            self._reset_one(i)
        self._needs_reset = False
        return self._observe()

    def _reset_one(self, i: int) -> None:
        fm, d, rng = self.fms[i], self.datas[i], self._rngs[i]
        mujoco.mj_resetData(fm.model, d)
        q0 = HOME_QPOS + rng.normal(0.0, self.cfg.init_qpos_noise, size=7)
        d.qpos[fm.arm_qpos] = q0
        d.ctrl[fm.arm_act] = q0
        d.qpos[fm.grip_qpos] = gripper_ctrl(np.array(1.0))
        d.ctrl[fm.grip_act] = gripper_ctrl(np.array(1.0))
        self.task.reset(fm, d, rng)
        mujoco.mj_forward(fm.model, d)
        self._target_rot[i] = d.site_xmat[fm.ee_site].reshape(3, 3)
        if self.cfg.ood.varies_vision:
            self._visuals[i] = sample_visuals(self.cfg.ood, rng)
        self._steps[i] = 0
        self._returns[i] = 0.0
        self._ever_success[i] = False

    # ------------------------------------------------------------------ step
    def step(self, actions: np.ndarray) -> StepResult:
        if self._needs_reset:
            raise RuntimeError("call reset() before step() on a FrankaVectorEnv")
        chunked = np.ndim(actions) == 3
        acts = check_actions(actions, self.spec)
        b, chunk, _ = acts.shape
        rewards = np.zeros((b, chunk), dtype=np.float32)
        valid = np.zeros((b, chunk), dtype=bool)
        terminated = np.zeros(b, dtype=bool)
        truncated = np.zeros(b, dtype=bool)
        success = np.zeros(b, dtype=bool)
        for k in range(chunk):
            active = np.flatnonzero(~(terminated | truncated))
            if active.size == 0:
                break
            valid[active, k] = True
            self._apply(active, acts[active, k])
            for i in active:
                ok, r = self._score(i)
                rewards[i, k] = r
                success[i] = ok
                self._returns[i] += r
                self._steps[i] += 1
                self._ever_success[i] |= ok
                terminated[i] = ok and self.cfg.terminate_on_success
                truncated[i] = (not terminated[i]) and self._steps[i] >= self.max_steps
        done = terminated | truncated
        info = self._finish(done, success)
        info["valid_steps"] = valid
        reward = rewards if chunked else rewards[:, 0]
        return self._observe(), reward, terminated, truncated, info

    def _apply(self, idx: np.ndarray, acts: np.ndarray) -> None:
        fms = [self.fms[i] for i in idx]
        datas = [self.datas[i] for i in idx]
        rots = self._target_rot[idx]
        # all envs share kinematics, so any env's FrankaModel indexes them
        targets = arm_targets(self.control, fms[0], datas, acts[:, :-1].astype(np.float64), rots)
        self._target_rot[idx] = rots
        grips = gripper_ctrl(acts[:, -1])
        for j, (fm, d) in enumerate(zip(fms, datas)):
            d.ctrl[fm.arm_act] = targets[j]
            d.ctrl[fm.grip_act] = grips[j]
            # step2 first: the position/velocity stage of this step was done by the previous
            # step1 (or mj_forward on reset), so obs, reward and Jacobians read fresh kinematics
            # with no extra pass; the physics is exactly mj_step(nstep=substeps)
            mujoco.mj_step2(fm.model, d)
            if self.substeps > 1:
                mujoco.mj_step(fm.model, d, nstep=self.substeps - 1)
            mujoco.mj_step1(fm.model, d)

    def _score(self, i: int) -> tuple[bool, float]:
        fm, d = self.fms[i], self.datas[i]
        ok, dense = self.task.evaluate(fm, d, d.site_xpos[fm.ee_site])
        if self.cfg.reward == "sparse":
            return ok, float(ok)
        return ok, dense + float(ok)

    def _finish(self, done: np.ndarray, success: np.ndarray) -> dict[str, Any]:
        """Record episode stats and the final observation, then auto-reset finished envs."""
        info: dict[str, Any] = {
            "success": success.copy(),
            "episode_return": np.where(done, self._returns, 0.0).astype(np.float32),
            "episode_length": np.where(done, self._steps, 0),
        }
        if done.any():
            info["final_observation"] = self._observe()
            idx = np.flatnonzero(done)
            info["success"][idx] = self._ever_success[idx]
            for i in idx:
                self._reset_one(i)
        return info

    # ------------------------------------------------------------ observation
    def _state(self, i: int, out: np.ndarray | None = None) -> np.ndarray:
        """State row of env ``i`` (layout in the module docstring), written into ``out``."""
        fm, d = self.fms[i], self.datas[i]
        out = np.empty(self.spec.state_dim, np.float32) if out is None else out
        ee = d.site_xpos[fm.ee_site]
        out[0:3] = ee
        out[3:9] = d.site_xmat[fm.ee_site][[0, 3, 6, 1, 4, 7]]  # first two columns of R
        out[9:16] = d.qpos[fm.arm_qpos]
        out[16:23] = d.qvel[fm.arm_dof]
        out[23] = d.qpos[fm.grip_qpos[0]] - d.qpos[fm.grip_qpos[1]]
        out[ROBOT_STATE_DIM:] = self.task.features(fm, d, ee)
        return out

    def _observe(self) -> Observation:
        b = self.num_envs
        state = np.empty((b, self.spec.state_dim), dtype=np.float32)
        for i in range(b):
            self._state(i, state[i])
        if not self.cfg.uses_state:  # rgb-only: proprioception only, task features zeroed
            state[:, ROBOT_STATE_DIM:] = 0.0
        images: dict[str, np.ndarray] = {}
        if self._rig is not None:
            for cam in self.cfg.cameras:
                images[cam] = self._rig.render(self.fms, self.datas, cam, self._visuals)
        return {"state": state, "images": images, "instruction": [self.spec.instruction] * b}

    # ---------------------------------------------------------------- extras
    def ee_positions(self) -> np.ndarray:
        """EE site positions ``[B, 3]`` (world, metres)."""
        return np.stack([d.site_xpos[fm.ee_site].copy() for fm, d in zip(self.fms, self.datas)])

    def render_frames(self) -> np.ndarray | None:
        if self._video_rig is None:
            self._video_rig = self._rig or CameraRig(*self.cfg.image_hw, self.cfg.robot_look)
        return self._video_rig.render(self.fms, self.datas, "third", self._visuals)

    def close(self) -> None:
        for rig in {id(r): r for r in (self._rig, self._video_rig) if r is not None}.values():
            rig.close()
        self._rig = self._video_rig = None
