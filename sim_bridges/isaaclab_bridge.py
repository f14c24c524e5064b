"""IsaacLab bridge (GPU only): ``make_env("isaaclab/Isaac-Lift-Cube-Franka-v0", num_envs=1024)``.

IsaacLab's manager-based RL envs are batched on the GPU and auto-reset inside ``step``:
``obs["policy"]`` is the state ``[N, D]`` (torch, CUDA), ``step`` returns
``(obs, reward, terminated, time_outs, extras)`` and finished envs are already reset in the
returned obs, so their true final observation is gone. We report it honestly:
``info["final_observation"]`` holds the post-reset rows and ``info["final_observation_is_reset"]``
is True. Success comes from the named termination terms (default ``success``, else the task's
goal term such as ``object_reached_goal``). Action chunks are executed sub-step by sub-step;
as IsaacLab steps every env together, an env whose episode ended inside a chunk is fed zero
actions for the rest of it (its new episode then starts a few idle steps in).

Needs Isaac Sim + IsaacLab on an RTX GPU; the pure mapping below is unit-tested on a CPU.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from rlinf_contracts.env import EnvSpec, Observation, StepResult, VectorEnv, check_actions
from rlinf_contracts.env_registry import register_env

SUCCESS_TERMS = ("success", "object_reached_goal", "goal_reached")


@dataclass(frozen=True)
class IsaacLabConfig:
    task: str = "Isaac-Lift-Cube-Franka-v0"
    max_episode_steps: int = 250
    action_scale: float = 1.0  # our [-1, 1] times this = IsaacLab's raw action
    device: str = "cuda:0"
    headless: bool = True
    success_terms: tuple[str, ...] = SUCCESS_TERMS


def policy_state(obs: Any) -> np.ndarray:
    """IsaacLab observation (dict with a ``policy`` group, or a tensor) -> float32 [N, D]."""
    x = obs["policy"] if isinstance(obs, Mapping) else obs
    if isinstance(x, Mapping):
        raise TypeError("IsaacLab 'policy' group is a dict; set concatenate_terms=True in the task's ObsCfg")
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x, dtype=np.float32)
    return arr.reshape(arr.shape[0], -1)


def scale_actions(actions: np.ndarray, scale: float) -> np.ndarray:
    """Normalised [-1, 1] actions -> IsaacLab raw actions (its action terms apply their own scale)."""
    return np.asarray(actions, dtype=np.float32) * np.float32(scale)


def success_from_terms(term_values: Mapping[str, Any], names: tuple[str, ...], n: int) -> np.ndarray:
    """OR of the named termination terms that exist (bool [N]); all False when none exist."""
    out = np.zeros(n, dtype=bool)
    for name in names:
        if name in term_values:
            v = term_values[name]
            out |= np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v, dtype=bool).reshape(n)
    return out


class IsaacLabEnv(VectorEnv):  # pragma: no cover - needs Isaac Sim on a GPU
    def __init__(self, cfg: IsaacLabConfig, num_envs: int) -> None:
        from isaaclab.app import AppLauncher

        self._app = AppLauncher(headless=cfg.headless).app
        import gymnasium as gym
        import isaaclab_tasks  # noqa: F401  (registers tasks)
        from isaaclab_tasks.utils import parse_env_cfg

        env_cfg = parse_env_cfg(cfg.task, device=cfg.device, num_envs=num_envs)
        self.env = gym.make(cfg.task, cfg=env_cfg)
        self.cfg = cfg
        raw, _ = self.env.reset()
        self._obs_raw = raw
        adim = int(np.prod(self.env.unwrapped.single_action_space.shape))
        self.spec = EnvSpec(num_envs=num_envs, state_dim=policy_state(raw).shape[1], action_dim=adim,
                            max_episode_steps=cfg.max_episode_steps, instruction=cfg.task,
                            control_hz=1.0 / self.env.unwrapped.step_dt)
        self._steps = np.zeros(num_envs, np.int64)
        self._returns = np.zeros(num_envs)

    def _obs(self) -> Observation:
        return {"state": policy_state(self._obs_raw), "images": {}, "instruction": [self.cfg.task] * self.num_envs}

    def reset(self, seed: int | None = None) -> Observation:
        if seed is not None:
            self.env.unwrapped.seed(seed)
        self._obs_raw, _ = self.env.reset()
        self._steps[:], self._returns[:] = 0, 0.0
        return self._obs()

    def _terms(self) -> dict[str, Any]:
        tm = self.env.unwrapped.termination_manager
        return {n: tm.get_term(n) for n in tm.active_terms}

    def step(self, actions: np.ndarray) -> StepResult:
        import torch

        chunked = np.ndim(actions) == 3
        acts = check_actions(actions, self.spec)
        b, chunk, _ = acts.shape
        rewards, valid = np.zeros((b, chunk), np.float32), np.zeros((b, chunk), bool)
        term, trunc, success = (np.zeros(b, bool) for _ in range(3))
        final = None
        for k in range(chunk):
            live = ~(term | trunc)
            if not live.any():
                break
            raw = scale_actions(acts[:, k], self.cfg.action_scale)
            raw[~live] = 0.0
            a = torch.as_tensor(raw, device=self.cfg.device)
            self._obs_raw, rew, te, to, _ = self.env.step(a)
            r = rew.detach().cpu().numpy().astype(np.float32)
            ok = success_from_terms(self._terms(), self.cfg.success_terms, b)
            rewards[live, k], valid[live, k], success[live] = r[live], True, ok[live]
            self._returns[live] += r[live]
            self._steps[live] += 1
            te_np, to_np = te.cpu().numpy().astype(bool), to.cpu().numpy().astype(bool)
            term |= live & te_np
            trunc |= live & ~te_np & (to_np | (self._steps >= self.cfg.max_episode_steps))
            final = self._obs()
        done = term | trunc
        info: dict[str, Any] = {"success": success, "valid_steps": valid,
                                "episode_return": np.where(done, self._returns, 0).astype(np.float32),
                                "episode_length": np.where(done, self._steps, 0)}
        if done.any():
            info["final_observation"], info["final_observation_is_reset"] = final, True
            self._steps[done], self._returns[done] = 0, 0.0
        return self._obs(), rewards if chunked else rewards[:, 0], term, trunc, info

    def close(self) -> None:
        self.env.close()
        self._app.close()


@register_env("isaaclab")
def make_isaaclab_env(task: str = "Isaac-Lift-Cube-Franka-v0", num_envs: int = 1, **kwargs: Any) -> VectorEnv:
    if importlib.util.find_spec("isaaclab") is None:
        raise ImportError(
            "the isaaclab bridge needs Isaac Sim and IsaacLab on an NVIDIA RTX GPU "
            "(see isaac-sim.github.io/IsaacLab installation); they are not installed here"
        )
    return IsaacLabEnv(IsaacLabConfig(task=task or "Isaac-Lift-Cube-Franka-v0", **kwargs), num_envs)  # pragma: no cover
