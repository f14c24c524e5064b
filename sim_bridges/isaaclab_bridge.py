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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlinf_contracts.env import EnvSpec, Observation, StepResult, VectorEnv
from rlinf_contracts.env_registry import register_env
from rlinf_contracts.stepping import Rows, RowStep, SteppedVectorEnv

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
        raise TypeError(
            "IsaacLab 'policy' group is a dict; set concatenate_terms=True in the task's ObsCfg"
        )
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x, dtype=np.float32)
    return arr.reshape(arr.shape[0], -1)


def scale_actions(actions: np.ndarray, scale: float) -> np.ndarray:
    """Normalised [-1, 1] actions -> IsaacLab raw actions (its action terms apply their own
    scale)."""
    return np.asarray(actions, dtype=np.float32) * np.float32(scale)


def _bools(x: Any, n: int) -> np.ndarray:
    """A torch tensor (any device) or array of flags -> bool [n]."""
    return np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x, dtype=bool).reshape(
        n
    )


def success_from_terms(
    term_values: Mapping[str, Any], names: tuple[str, ...], n: int
) -> np.ndarray:
    """OR of the named termination terms that exist (bool [N]); all False when none exist."""
    out = np.zeros(n, dtype=bool)
    for name in names:
        if name in term_values:
            out |= _bools(term_values[name], n)
    return out


class IsaacLabEnv(SteppedVectorEnv):
    """An IsaacLab manager-based env (``env``, a gym env) behind the contract.

    IsaacLab decides termination itself (its termination terms, success among them) and resets
    finished envs inside its own ``step``: its flags are passed on as the simulator's verdicts,
    ``_reset_rows`` has nothing left to do, and every row steps every sub-step (idle rows get
    zero actions), so the final observation is the post-reset one of the sub-step it ended.
    """

    steps_idle_rows = True

    def __init__(self, cfg: IsaacLabConfig, env: Any, app: Any = None) -> None:
        self.cfg = cfg
        self.env = env
        self._app = app
        self._obs_raw, _ = env.reset()
        n = policy_state(self._obs_raw).shape[0]
        adim = int(np.prod(env.unwrapped.single_action_space.shape))
        spec = EnvSpec(
            num_envs=n,
            state_dim=policy_state(self._obs_raw).shape[1],
            action_dim=adim,
            max_episode_steps=cfg.max_episode_steps,
            instruction=cfg.task,
            control_hz=1.0 / env.unwrapped.step_dt,
        )
        super().__init__(spec, terminate_on_success=False)  # IsaacLab's own terms terminate

    def _observe(self) -> Observation:
        return {
            "state": policy_state(self._obs_raw),
            "images": {},
            "instruction": [self.cfg.task] * self.num_envs,
        }

    def reset(self, seed: int | Sequence[int] | None = None) -> Observation:
        if seed is not None and not isinstance(seed, int):
            raise TypeError(
                "IsaacLab seeds the whole batch from one int; per-row seeds (a learner's "
                "algorithm.revisit_share) are not supported on this family"
            )
        if seed is not None:
            self.env.unwrapped.seed(seed)
        self._obs_raw, _ = self.env.reset()
        self._begin_episodes(self._all_rows)
        return self._observe()

    def _reset_rows(self, rows: np.ndarray) -> None:
        """Nothing to do: IsaacLab already reset these rows inside its ``step``. (A row cut by
        ``max_episode_steps`` before IsaacLab's own time-out goes on in the simulator: keep
        ``max_episode_steps`` at or above the task's ``episode_length_s`` / ``step_dt``.)"""

    def _terms(self) -> dict[str, Any]:
        tm = self.env.unwrapped.termination_manager
        return {n: tm.get_term(n) for n in tm.active_terms}

    def _step_rows(self, rows: Rows, actions: np.ndarray) -> RowStep:
        import torch

        b = self.num_envs
        raw = np.zeros((b, self.spec.action_dim), np.float32)
        raw[rows] = scale_actions(actions, self.cfg.action_scale)
        self._obs_raw, rew, te, to, _ = self.env.step(torch.as_tensor(raw, device=self.cfg.device))
        reward = np.asarray(
            rew.detach().cpu().numpy() if hasattr(rew, "detach") else rew, np.float32
        ).reshape(b)
        ok = success_from_terms(self._terms(), self.cfg.success_terms, b)
        return RowStep(
            reward[rows], ok[rows], terminated=_bools(te, b)[rows], truncated=_bools(to, b)[rows]
        )

    def step(self, actions: np.ndarray) -> StepResult:
        obs, reward, term, trunc, info = super().step(actions)
        if "final_observation" in info:
            info["final_observation_is_reset"] = True
        return obs, reward, term, trunc, info

    def close(self) -> None:
        self.env.close()
        if self._app is not None:
            self._app.close()


def launch(
    cfg: IsaacLabConfig, num_envs: int
) -> IsaacLabEnv:  # pragma: no cover - needs Isaac Sim on a GPU
    """Start Isaac Sim (it must run before IsaacLab's modules import) and build the task."""
    from isaaclab.app import AppLauncher

    app = AppLauncher(headless=cfg.headless).app
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  (registers tasks)
    from isaaclab_tasks.utils import parse_env_cfg

    env_cfg = parse_env_cfg(cfg.task, device=cfg.device, num_envs=num_envs)
    return IsaacLabEnv(cfg, gym.make(cfg.task, cfg=env_cfg), app)


@register_env("isaaclab")
def make_isaaclab_env(
    task: str = "Isaac-Lift-Cube-Franka-v0", num_envs: int = 1, **kwargs: Any
) -> VectorEnv:
    if importlib.util.find_spec("isaaclab") is None:
        raise ImportError(
            "the isaaclab bridge needs Isaac Sim and IsaacLab on an NVIDIA RTX GPU "
            "(see isaac-sim.github.io/IsaacLab installation); they are not installed here"
        )
    return launch(
        IsaacLabConfig(task=task or "Isaac-Lift-Cube-Franka-v0", **kwargs), num_envs
    )  # pragma: no cover
