"""ManiSkill3 bridge: ``make_env("maniskill/PickCube-v1", num_envs=8, obs_mode="rgb")``.

ManiSkill3 is natively batched on the GPU (``physx_cuda``: one env object holds all B envs,
partial resets via ``options={"env_idx": ...}``); on a CPU (``physx_cpu``) one env object holds
one env, so B of them run in a :class:`~sim_bridges.loop_env.LoopVectorEnv`. Both paths share
the pure mapping below (state flattening, camera renaming, control-mode names), which is
unit-tested without ManiSkill installed. ``mani-skill`` is an optional extra; on a CPU it also
needs a Vulkan driver (Mesa >= 24.3 lavapipe) — even for state observations, because SAPIEN
builds render materials with every task scene (checked with mani-skill 3.0.1 / sapien 3.0.3:
without a Vulkan device, ``gym.make("PickCube-v1", sim_backend="physx_cpu",
render_backend="none")`` fails with "failed to find a rendering device").
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from sim_bridges.contract import EnvSpec, Observation, StepResult, VectorEnv, check_actions
from sim_bridges.loop_env import LoopVectorEnv, SingleEnv, SingleObs, SingleStep
from sim_bridges.registry import register_env

log = logging.getLogger(__name__)
CONTROL_MODES = {"ee_delta": "pd_ee_delta_pose", "ee_delta_pos": "pd_ee_delta_pos",
                 "joint_delta": "pd_joint_delta_pos"}
CAMERA_ALIASES = {"third": "base_camera", "wrist": "hand_camera"}
OBS_MODES = {"state": "state", "rgb": "rgb", "state+rgb": "rgb"}


@dataclass(frozen=True)
class ManiSkillConfig:
    task: str = "PickCube-v1"
    obs_mode: str = "state"  # state | rgb | state+rgb
    control: str = "ee_delta"  # ours (see CONTROL_MODES) or a native ManiSkill control mode
    image_size: int = 128
    cameras: tuple[str, ...] = ("third",)
    max_episode_steps: int = 50
    sim_backend: str = "auto"  # auto | physx_cpu | physx_cuda
    render_backend: str | None = None  # None = ManiSkill's default; "none", "cpu", "gpu", "cuda:0"...
    reward: str = "dense"  # dense -> normalized_dense | sparse
    terminate_on_success: bool = True


def native_control_mode(control: str) -> str:
    return CONTROL_MODES.get(control, control)


def choose_backend(requested: str, cuda_available: bool) -> str:
    """``auto`` -> GPU-batched physics where CUDA is present, else ``physx_cpu``."""
    if requested not in ("auto", "physx_cpu", "physx_cuda", "cpu", "gpu"):
        raise ValueError(f"sim_backend={requested!r}; use auto, physx_cpu or physx_cuda")
    if requested == "auto":
        return "physx_cuda" if cuda_available else "physx_cpu"
    if requested in ("physx_cuda", "gpu") and not cuda_available:
        raise RuntimeError("sim_backend=physx_cuda needs a CUDA GPU; use physx_cpu here")
    return {"cpu": "physx_cpu", "gpu": "physx_cuda"}.get(requested, requested)


def to_numpy(x: Any) -> np.ndarray:
    """torch tensor (any device) or array -> numpy."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def flatten_state(obs: Any) -> np.ndarray:
    """ManiSkill obs -> float32 ``[N, D]``: a flat state tensor as is; for dict observations
    (rgb modes) the ``agent`` and ``extra`` leaves in sorted key order, each flattened per env."""
    if not isinstance(obs, Mapping):
        return to_numpy(obs).astype(np.float32)
    parts: list[np.ndarray] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key in sorted(node):
                walk(node[key])
        else:
            arr = to_numpy(node).astype(np.float32)
            parts.append(arr.reshape(arr.shape[0], -1))

    for group in ("agent", "extra"):
        if group in obs:
            walk(obs[group])
    if not parts:
        raise KeyError(f"ManiSkill observation has no 'agent'/'extra' entries; keys: {sorted(obs)}")
    return np.concatenate(parts, axis=1)


def extract_images(obs: Mapping[str, Any], cameras: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``obs["sensor_data"][native_cam]["rgb"]`` -> ``{our_cam: uint8 [N, H, W, 3]}``."""
    sensors = obs.get("sensor_data", {})
    out = {}
    for cam in cameras:
        native = CAMERA_ALIASES.get(cam, cam)
        if native not in sensors:
            raise KeyError(f"camera {cam!r} (ManiSkill {native!r}) not in sensor data; have {sorted(sensors)}")
        out[cam] = to_numpy(sensors[native]["rgb"])[..., :3].astype(np.uint8)
    return out


def merge_final_rows(final: Observation | None, obs: Observation, rows: np.ndarray) -> Observation | None:
    """Keep each env's observation from the sub-step its episode ended (rows where ``rows``)."""
    if not rows.any():
        return final
    if final is None:
        final = {"state": obs["state"].copy(), "images": {k: v.copy() for k, v in obs["images"].items()},
                 "instruction": list(obs["instruction"])}
        return final
    final["state"][rows] = obs["state"][rows]
    for cam, img in obs["images"].items():
        final["images"][cam][rows] = img[rows]
    return final


def _make_native(cfg: ManiSkillConfig, num_envs: int, backend: str):  # pragma: no cover - needs mani_skill
    import gymnasium as gym
    import mani_skill.envs  # noqa: F401  (registers the tasks)

    return gym.make(
        cfg.task, num_envs=num_envs, obs_mode=OBS_MODES[cfg.obs_mode],
        control_mode=native_control_mode(cfg.control), sim_backend=backend,
        reward_mode="normalized_dense" if cfg.reward == "dense" else "sparse",
        sensor_configs={"width": cfg.image_size, "height": cfg.image_size},
        max_episode_steps=10**9,
        **({"render_backend": cfg.render_backend} if cfg.render_backend is not None else {}),
    )


class ManiSkillSingle(SingleEnv):  # pragma: no cover - needs mani_skill
    """One ``physx_cpu`` env (ManiSkill's CPU backend holds one env per object)."""

    def __init__(self, cfg: ManiSkillConfig) -> None:
        self.cfg = cfg
        self.env = _make_native(cfg, 1, "physx_cpu")
        space = self.env.action_space
        self.low, self.high = np.asarray(space.low).reshape(-1), np.asarray(space.high).reshape(-1)

    def _obs(self, raw: Any) -> SingleObs:
        cams = self.cfg.cameras if "rgb" in self.cfg.obs_mode else ()
        images = {k: v[0] for k, v in extract_images(raw, cams).items()} if cams else {}
        return SingleObs(flatten_state(raw)[0], images, self.cfg.task)

    def reset(self, seed: int) -> SingleObs:
        raw, _ = self.env.reset(seed=seed)
        return self._obs(raw)

    def step(self, action: np.ndarray) -> SingleStep:
        scaled = self.low + (action + 1.0) * 0.5 * (self.high - self.low)
        raw, rew, term, _, info = self.env.step(scaled[None])
        success = bool(to_numpy(info.get("success", False)).reshape(-1)[0])
        fail = bool(to_numpy(info.get("fail", False)).reshape(-1)[0])
        return SingleStep(self._obs(raw), float(to_numpy(rew).reshape(-1)[0]), success, fail)

    def close(self) -> None:
        self.env.close()


class ManiSkillBatched(VectorEnv):  # pragma: no cover - needs mani_skill and a GPU
    """All B envs in one GPU-simulated ManiSkill env; auto-reset through partial resets."""

    def __init__(self, cfg: ManiSkillConfig, num_envs: int, backend: str) -> None:
        self.cfg = cfg
        self.env = _make_native(cfg, num_envs, backend)
        raw, _ = self.env.reset(seed=0)
        self._raw = raw
        space = self.env.action_space
        self.low, self.high = np.asarray(space.low)[0], np.asarray(space.high)[0]
        s = cfg.image_size
        self.spec = EnvSpec(num_envs=num_envs, state_dim=flatten_state(raw).shape[1],
                            action_dim=int(self.low.shape[0]),
                            cameras={c: (s, s) for c in cfg.cameras} if "rgb" in cfg.obs_mode else {},
                            max_episode_steps=cfg.max_episode_steps, instruction=cfg.task)
        self._steps = np.zeros(num_envs, dtype=np.int64)
        self._returns = np.zeros(num_envs)

    def _obs(self, raw: Any) -> Observation:
        images = extract_images(raw, self.cfg.cameras) if self.spec.cameras else {}
        return {"state": flatten_state(raw), "images": images, "instruction": [self.cfg.task] * self.num_envs}

    def reset(self, seed: int | None = None) -> Observation:
        seeds = None if seed is None else [seed + i for i in range(self.num_envs)]
        self._raw, _ = self.env.reset(seed=seeds)
        self._steps[:] = 0
        self._returns[:] = 0.0
        return self._obs(self._raw)

    def step(self, actions: np.ndarray) -> StepResult:
        import torch

        chunked = np.ndim(actions) == 3
        acts = check_actions(actions, self.spec)
        b, chunk, _ = acts.shape
        rewards = np.zeros((b, chunk), np.float32)
        valid = np.zeros((b, chunk), bool)
        term, trunc, success = (np.zeros(b, bool) for _ in range(3))
        final: Observation | None = None
        for k in range(chunk):
            live = ~(term | trunc)
            if not live.any():
                break
            scaled = self.low + (acts[:, k] + 1.0) * 0.5 * (self.high - self.low)
            scaled[~live] = 0.0  # finished envs idle until the chunk ends, their results ignored
            raw, rew, _, _, info = self.env.step(torch.as_tensor(scaled, device=self.env.unwrapped.device))
            self._raw = raw
            r, ok = to_numpy(rew).astype(np.float32), to_numpy(info["success"]).astype(bool)
            fail = to_numpy(info.get("fail", np.zeros(b, bool))).astype(bool)
            rewards[live, k], valid[live, k] = r[live], True
            success[live] = ok[live]
            self._returns[live] += r[live]
            self._steps[live] += 1
            was_done = term | trunc
            term |= live & ((ok & self.cfg.terminate_on_success) | fail)
            trunc |= live & ~term & (self._steps >= self.cfg.max_episode_steps)
            final = merge_final_rows(final, self._obs(raw), (term | trunc) & ~was_done)
        done = term | trunc
        info_out: dict[str, Any] = {"success": success, "valid_steps": valid,
                                    "episode_return": np.where(done, self._returns, 0).astype(np.float32),
                                    "episode_length": np.where(done, self._steps, 0)}
        if done.any():
            info_out["final_observation"] = final
            idx = np.flatnonzero(done)
            self._raw, _ = self.env.reset(options={"env_idx": torch.as_tensor(idx)})
            self._steps[idx], self._returns[idx] = 0, 0.0
        return self._obs(self._raw), rewards if chunked else rewards[:, 0], term, trunc, info_out


@register_env("maniskill")
def make_maniskill_env(task: str = "PickCube-v1", num_envs: int = 1, **kwargs: Any) -> VectorEnv:
    if importlib.util.find_spec("mani_skill") is None:
        raise ImportError(
            "the maniskill bridge needs ManiSkill3: `pip install mani-skill` (extra `maniskill`); "
            "on a CPU also a Vulkan driver (Mesa >= 24.3 lavapipe, e.g. mesa-vulkan-drivers)"
        )
    cfg = ManiSkillConfig(task=task or "PickCube-v1", **kwargs)
    import torch

    backend = choose_backend(cfg.sim_backend, torch.cuda.is_available())
    if backend == "physx_cuda":
        return ManiSkillBatched(cfg, num_envs, backend)
    adapters = [ManiSkillSingle(cfg) for _ in range(num_envs)]  # pragma: no cover
    probe = adapters[0].reset(0)
    s = cfg.image_size
    spec = EnvSpec(num_envs=num_envs, state_dim=int(probe.state.shape[0]), action_dim=int(adapters[0].low.shape[0]),
                   cameras={c: (s, s) for c in cfg.cameras} if "rgb" in cfg.obs_mode else {},
                   max_episode_steps=cfg.max_episode_steps, instruction=cfg.task)
    return LoopVectorEnv(adapters, spec, terminate_on_success=cfg.terminate_on_success)
