"""``FrankaVectorEnv``: B MuJoCo Franka envs stepped in one process (see ``rlinf_contracts.env``).

Why a Python loop over ``MjData`` with shared ``MjModel``s: each control step is one C call
(``mj_step`` with ``nstep=substeps``) per env, the controller math is batched with numpy, and
there is no process or thread hop, so per-step overhead stays small next to the physics.
Parallelism across cores comes from running several env workers, not from this class.

State vector (float32): ``ee_pos(3) ee_rot6d(6) q(7) dq(7) gripper_width(1)`` then the task's
features (reach: ``target(3) target-ee(3)``; push: ``obj, obj-ee, goal, goal-obj``; lift:
``obj, obj-ee, height``; insert: ``hole, hole-ee``).

``ee_impedance`` control, and tasks that measure contact force (insert), step the physics
substep by substep (:mod:`.torque_loop`); every other env keeps one ``mj_step`` call per
control step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import mujoco
import numpy as np

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.env import EnvSpec, Observation, StepResult
from rlinf_contracts.impedance import ImpedanceGains
from rlinf_contracts.stepping import Rows, RowStep, SteppedVectorEnv, copy_obs
from sim_bridges.mujoco_franka.config import SHAPING_SCALE, FrankaEnvConfig
from sim_bridges.mujoco_franka.control import ACTION_DIMS, ControlConfig, arm_targets, gripper_ctrl
from sim_bridges.mujoco_franka.model import (
    HOME_QPOS,
    FrankaModel,
    SceneOptions,
    _as_slice,
    compile_scene,
)
from sim_bridges.mujoco_franka.ood import VisualState, sample_visuals
from sim_bridges.mujoco_franka.render import CameraRig
from sim_bridges.mujoco_franka.robot_spec import franka_robot_spec
from sim_bridges.mujoco_franka.tasks import FrankaTask, get_task
from sim_bridges.mujoco_franka.torque_loop import ImpedanceLoop, contact_force

log = logging.getLogger(__name__)
ROBOT_STATE_DIM = 24
_MODEL_CACHE: dict[tuple, FrankaModel] = {}


def cached_model(options: SceneOptions) -> FrankaModel:
    """Compile each distinct scene once per process (compiling takes ~0.1 s)."""
    key = (
        options.objects,
        options.markers,
        options.marker_discs,
        options.timestep,
        options.table_rgba,
        tuple(sorted(options.extra_cameras.items())),
        options.arm_actuation,
        options.builders,
    )
    if key not in _MODEL_CACHE:
        _MODEL_CACHE[key] = compile_scene(options)
    return _MODEL_CACHE[key]


# layout of FrankaVectorEnv._raw rows: what _row_sources gathers, then the task's raw_views
_RAW_EE, _RAW_XMAT, _RAW_Q, _RAW_DQ, _RAW_GRIP = (
    slice(0, 3),
    slice(3, 12),
    slice(12, 19),
    slice(19, 26),
    slice(26, 28),
)
_RAW_TASK = 28
# raw columns of state[:, :23]: ee_pos, first two columns of R (xmat is row-major), q, dq
_STATE_COLS = np.r_[0:3, 3, 6, 9, 4, 7, 10, 12:26]


def _row_sources(fm: FrankaModel, d: mujoco.MjData, task: FrankaTask) -> Callable[[], tuple]:
    """Callable returning the arrays one raw row is concatenated from. Views into ``d`` are
    made once when every index is basic (the usual case); else they are re-indexed each call."""
    grip = _as_slice(np.asarray(fm.grip_qpos))
    parts = [
        (d.site_xpos, fm.ee_site),
        (d.site_xmat, fm.ee_site),
        (d.qpos, fm.q_slice),
        (d.qvel, fm.dof_slice),
        (d.qpos, grip),
    ]
    if not any(isinstance(ix, np.ndarray) for _, ix in parts):
        views = tuple(a[ix] for a, ix in parts) + tuple(task.raw_views(fm, d))
        return lambda: views
    return lambda: tuple(a[ix] for a, ix in parts) + tuple(task.raw_views(fm, d))


def _ctrl_target(fm: FrankaModel, d: mujoco.MjData) -> Any:
    """Something ``[:] = ctrl_row`` writes the actuators of ``[7 arm, 2 fingers]`` through."""
    if isinstance(fm.ctrl_order, slice):
        return d.ctrl[fm.ctrl_order]

    class _Fancy:
        def __setitem__(self, key: slice, value: np.ndarray) -> None:
            d.ctrl[fm.ctrl_order] = value

    return _Fancy()


VIDEO_HW = (240, 320)  # height, width of render_frames() for state-obs envs


class FrankaVectorEnv(SteppedVectorEnv):
    """The embedded default simulator: Franka Panda reach / push / lift on a table.

    Chunking, episode statistics and auto-reset come from :class:`SteppedVectorEnv`; the hooks
    here step, score and observe the running envs batched in numpy."""

    def __init__(self, cfg: FrankaEnvConfig) -> None:
        self.cfg = cfg
        task_cls = get_task(cfg.task)
        self.task: FrankaTask = task_cls(pos_scale=cfg.ood.pos_scale, pos_shift=cfg.ood.pos_shift)
        self.control = ControlConfig(
            mode=cfg.control or self.task.default_control,
            control_hz=cfg.control_hz,
            impedance=cfg.impedance,
        )
        dt, self.substeps = cfg.timing()
        torque = self.control.mode == "ee_impedance"
        if cfg.impedance is not None and not torque:
            raise ConfigError(
                f"env.kwargs.impedance is set but control is {self.control.mode!r}; "
                "impedance gains apply to control=ee_impedance only"
            )
        shapes = cfg.ood.object_shapes if self.task.needs_object else ("box",)
        self.fms: list[FrankaModel] = []
        for i in range(cfg.num_envs):
            opts = SceneOptions(
                objects=self.task.objects(shapes[i % len(shapes)]),
                markers=self.task.markers,
                marker_discs=tuple(self.task.marker_discs),
                timestep=dt,
                extra_cameras=dict(self.task.extra_cameras),
                arm_actuation="torque" if torque else "position",
                builders=tuple(self.task.scene_builders),
            )
            self.fms.append(compile_scene(opts) if cfg.private_models else cached_model(opts))
        self.datas = [mujoco.MjData(fm.model) for fm in self.fms]
        self.max_steps = cfg.max_episode_steps or self.task.default_max_steps
        h, w = cfg.image_hw
        spec = EnvSpec(
            num_envs=cfg.num_envs,
            state_dim=ROBOT_STATE_DIM + self.task.feature_dim,
            action_dim=ACTION_DIMS[self.control.mode],
            cameras={c: (h, w) for c in cfg.cameras} if cfg.uses_images else {},
            max_episode_steps=self.max_steps,
            control_hz=cfg.control_hz,
            instruction=self.task.instruction,
            robot=franka_robot_spec(cfg, self.task, self.control),
        )
        super().__init__(spec, terminate_on_success=cfg.terminate_on_success)
        self._rig = CameraRig(h, w, cfg.robot_look) if cfg.uses_images else None
        self._video_rig: CameraRig | None = None
        if self._rig:  # fail now, not on the first step, on a bad camera name
            from sim_bridges.mujoco_franka.render import camera_id

            for cam in cfg.cameras:
                camera_id(self.fms[0], cam)
        b = cfg.num_envs
        self._target_rot = np.zeros((b, 3, 3))
        self._potential = np.zeros(b)  # ``shaped`` reward: each env's last potential
        self._visuals: list[VisualState | None] = [None] * b
        # state rows of every env, kept current after each physics step and reset
        self._state_buf = np.zeros((b, self.spec.state_dim), dtype=np.float32)
        # raw per-env quantities (layout: _RAW_*), gathered with one C call per env per step so
        # state rows, rewards and the controller's inputs are computed batched in numpy
        self._raw = np.zeros((b, _RAW_TASK + self.task.raw_dim))
        self._raw_const = np.array([self.task.raw_const(fm) for fm in self.fms])
        self._sources = [_row_sources(fm, d, self.task) for fm, d in zip(self.fms, self.datas)]
        self._ctrl_views = [_ctrl_target(fm, d) for fm, d in zip(self.fms, self.datas)]
        self._models = [fm.model for fm in self.fms]
        # ee_impedance: the law runs on every physics substep (torque_loop); tasks that measure
        # contact force need the per-substep loop too, in any mode
        self._impedance = (
            ImpedanceLoop(
                self.control.action_space.impedance or ImpedanceGains(),
                b,
                self.control.pos_scale,
                dt,
            )
            if torque
            else None
        )
        self._contact_geoms = [self.task.contact_geoms(fm) for fm in self.fms]
        self._per_substep = torque or any(len(g) for g in self._contact_geoms)
        self.peak_contact_force = np.zeros(b)  # N, this episode's peak per env
        self._ended_peak = np.zeros(b)  # the peak of each env's last finished episode

    # ----------------------------------------------------------------- reset
    def reset(self, seed: int | Sequence[int] | None = None) -> Observation:
        """Reset every env; the first reset without a seed uses ``cfg.seed``."""
        return super().reset(self.cfg.seed if seed is None and self._needs_reset else seed)

    def _reset_rows(self, rows: np.ndarray) -> None:
        self._ended_peak[rows] = self.peak_contact_force[rows]
        self.peak_contact_force[rows] = 0.0
        for i in rows.tolist():
            self._reset_one(i)
        _, dense = self._refresh(rows)  # _raw and state rows of all reset envs in one batch
        self._potential[rows] = SHAPING_SCALE * dense

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
        if self._impedance is not None:
            self._impedance.reset(i, fm, d, self._target_rot[i])
        if self.cfg.ood.varies_vision:
            self._visuals[i] = sample_visuals(self.cfg.ood, rng)

    # ------------------------------------------------------------------ step
    def _step_rows(self, rows: Rows, actions: np.ndarray) -> RowStep:
        ok, dense = self._apply(self._all_rows if isinstance(rows, slice) else rows, rows, actions)
        return RowStep(self._reward(rows, ok, dense), ok)

    def _reward(self, rows: Rows, ok: np.ndarray, dense: np.ndarray) -> np.ndarray:
        """``cfg.reward`` from the step's success and the task's dense score (a negative distance).

        ``shaped`` is potential-based shaping (Ng et al. 1999) with the dense score as the
        potential: ``ok + k (phi_t - phi_{t-1})``. An episode's undiscounted return telescopes to
        ``success + k (phi_end - phi_start)``, so episodes from one start state (a GRPO group)
        rank by success first (``SHAPING_SCALE`` keeps an episode's shaping below a success's 1),
        then by how much closer they ended -- a failed group still says which tries came nearer.
        """
        if self.cfg.reward == "sparse":
            return ok.astype(np.float64)
        if self.cfg.reward == "dense":
            return dense + ok
        phi = SHAPING_SCALE * dense
        reward = ok + phi - self._potential[rows]
        self._potential[rows] = phi
        return reward

    def _apply(
        self, idx: np.ndarray, sel: np.ndarray | slice, acts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """One control step of envs ``idx`` (``sel`` indexes the same rows, maybe as a slice):
        controller, physics, then their state rows and scores, batched.
        Returns (success ``[n]``, the task's dense score ``[n]``)."""
        ids = idx.tolist()
        datas = [self.datas[i] for i in ids]
        raw = self._raw[sel]  # kinematics of the previous step1 / reset, still current
        if self._impedance is not None:
            self._impedance.set_targets(ids, raw[:, _RAW_EE], acts[:, :3].astype(np.float64))
            grip = gripper_ctrl(acts[:, -1])
            for j, i in enumerate(ids):
                datas[j].ctrl[self.fms[i].grip_act] = grip[j]
        else:
            self._set_joint_targets(ids, sel, datas, raw, acts)
        if self._per_substep:
            self._substeps(ids, datas)
            return self._refresh(idx, sel)
        nsub = self.substeps - 1
        models = self._models
        for j, i in enumerate(ids):
            model, d = models[i], datas[j]
            # step2 first: the position/velocity stage of this step was done by the previous
            # step1 (or mj_forward on reset), so obs, reward and Jacobians read fresh kinematics
            # with no extra pass; the physics is exactly mj_step(nstep=substeps)
            mujoco.mj_step2(model, d)
            if nsub > 0:
                mujoco.mj_step(model, d, nstep=nsub)
            mujoco.mj_step1(model, d)
        return self._refresh(idx, sel)

    def _set_joint_targets(
        self,
        ids: list[int],
        sel: np.ndarray | slice,
        datas: list[mujoco.MjData],
        raw: np.ndarray,
        acts: np.ndarray,
    ) -> None:
        """Position-controlled modes: the controller's joint and finger targets into ``ctrl``."""
        rots = self._target_rot[sel]
        # all envs share kinematics, so any env's FrankaModel indexes them
        targets = arm_targets(
            self.control,
            self.fms[0],
            datas,
            acts[:, :-1].astype(np.float64),
            rots,
            q=raw[:, _RAW_Q],
            rot=raw[:, _RAW_XMAT].reshape(-1, 3, 3),
        )
        self._target_rot[sel] = rots
        ctrl = np.concatenate([targets, gripper_ctrl(acts[:, -1])], axis=1)
        for j, i in enumerate(ids):
            self._ctrl_views[i][:] = ctrl[j]

    def _substeps(self, ids: list[int], datas: list[mujoco.MjData]) -> None:
        """The physics of one control step, substep by substep: the impedance law's torques
        before each (torque control), the task's contact force after each."""
        imp, models, peak = self._impedance, self._models, self.peak_contact_force
        for _ in range(self.substeps):
            tau = None if imp is None else imp.torques(self.fms[0], datas, ids)
            for j, i in enumerate(ids):
                d = datas[j]
                if imp is not None and tau is not None:
                    imp.apply(self.fms[i], d, tau[j])
                mujoco.mj_step2(models[i], d)
                # between step2 and step1: contacts and constraint forces of the same step
                # (step1 detects new contacts, their forces come with the next step2)
                if len(self._contact_geoms[i]):
                    force = contact_force(models[i], d, self._contact_geoms[i])
                    peak[i] = max(peak[i], force)
                mujoco.mj_step1(models[i], d)

    def step(self, actions: np.ndarray) -> StepResult:
        """The contract's step; envs whose task measures contact force add
        ``info["peak_contact_force"]`` (N): each finished episode's peak, 0 for running ones."""
        out = super().step(actions)
        if self._per_substep and any(len(g) for g in self._contact_geoms):
            done = out[2] | out[3]
            out[4]["peak_contact_force"] = np.where(done, self._ended_peak, 0.0)
        return out

    def _refresh(
        self, idx: np.ndarray, sel: np.ndarray | slice | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Gather envs ``idx`` into ``_raw``, rewrite their state rows; (success, dense score)."""
        sel = idx if sel is None else sel
        raw_all = self._raw
        for i in idx.tolist():
            np.concatenate(self._sources[i](), out=raw_all[i])
        raw = raw_all[sel]
        ee, task_raw, const = raw[:, _RAW_EE], raw[:, _RAW_TASK:], self._raw_const[sel]
        width = raw[:, _RAW_GRIP.start] - raw[:, _RAW_GRIP.start + 1]
        whole = isinstance(sel, slice)  # then write the rows in place
        state = self._state_buf if whole else np.empty((len(idx), self.spec.state_dim), np.float32)
        state[:, : ROBOT_STATE_DIM - 1] = raw[:, _STATE_COLS]
        state[:, ROBOT_STATE_DIM - 1] = width
        state[:, ROBOT_STATE_DIM:] = self.task.batch_features(ee, task_raw, const)
        if not whole:
            self._state_buf[sel] = state
        ok, dense = self.task.batch_evaluate(ee, task_raw, width, const)
        return np.asarray(ok, dtype=bool), np.asarray(dense, dtype=np.float64)

    # ------------------------------------------------------------ observation
    def _state(self, i: int, out: np.ndarray | None = None) -> np.ndarray:
        """State row of env ``i`` (layout in the module docstring) as of its last refresh."""
        out = np.empty(self.spec.state_dim, np.float32) if out is None else out
        out[:] = self._state_buf[i]
        return out

    def _observe_after_reset(self, rows: np.ndarray, obs: Observation) -> Observation:
        """Copy ``obs`` and re-render only the reset rows (rendering is the expensive part)."""
        return self._observe(rows, copy_obs(obs))

    def _observe(
        self, idx: np.ndarray | None = None, obs: Observation | None = None
    ) -> Observation:
        """Batched obs of all envs, or (with ``idx`` and ``obs``) refresh rows ``idx`` of
        ``obs``."""
        if obs is None or idx is None:
            b, (h, w) = self.num_envs, self.cfg.image_hw
            obs = {
                "state": self._state_buf.copy(),
                "images": {c: np.empty((b, h, w, 3), np.uint8) for c in self.spec.cameras},
                "instruction": [self.spec.instruction] * b,
            }
            idx = np.arange(b)
        else:
            obs["state"][idx] = self._state_buf[idx]
        if not self.cfg.uses_state:  # rgb-only: proprioception only, task features zeroed
            obs["state"][:, ROBOT_STATE_DIM:] = 0.0
        if self._rig is not None:
            for cam, img in obs["images"].items():
                for i in idx.tolist():
                    self._rig.render(
                        [self.fms[i]], [self.datas[i]], cam, [self._visuals[i]], out=img[i : i + 1]
                    )
        return obs

    # ---------------------------------------------------------------- extras
    def true_state(self) -> np.ndarray:
        """State rows ``[B, state_dim]`` with the task features (object and goal poses) as of the
        last step, also in rgb mode, where the observation zeroes them: for judges and
        diagnostics that score a camera-only policy against the scene, never for the policy."""
        return self._state_buf.copy()

    def ee_positions(self) -> np.ndarray:
        """EE site positions ``[B, 3]`` (world, metres)."""
        return np.stack([d.site_xpos[fm.ee_site].copy() for fm, d in zip(self.fms, self.datas)])

    def render_frames(self) -> np.ndarray | None:
        if self._video_rig is None:
            # image-obs envs reuse their observation cameras; state-obs envs get a rig sized for
            # people (obs images are sized for policies: 64 px of collision meshes)
            self._video_rig = self._rig or CameraRig(*VIDEO_HW, "visual")
        return self._video_rig.render(self.fms, self.datas, "third", self._visuals)

    def close(self) -> None:
        for rig in {id(r): r for r in (self._rig, self._video_rig) if r is not None}.values():
            rig.close()
        self._rig = self._video_rig = None
