"""robosuite bridge: ``make_env("robosuite/Lift", num_envs=4, obs_mode="state")``.

Any ``robosuite.make`` task (Lift, Stack, Door, NutAssembly, PickPlace...) with its default
composite controller (for a Panda: operational-space pose control, 7-D action = 6 pose deltas +
gripper, already in [-1, 1]). The state vector is robosuite's ``robot0_proprio-state`` followed
by ``object-state``; cameras are renamed (``third`` = ``agentview``, ``wrist`` =
``robot0_eye_in_hand``; other robosuite camera names pass through) and flipped to image-row-0
at the top. Success is robosuite's own ``_check_success``. robosuite's Python layer is slow
(~150 steps/s per env on an idle core); prefer ``mujoco_franka`` for training at scale.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlinf_contracts.env import EnvSpec
from rlinf_contracts.env_registry import register_env
from sim_bridges.loop_env import LoopVectorEnv, SingleEnv, SingleObs, SingleStep

log = logging.getLogger(__name__)
CAMERA_ALIASES = {"third": "agentview", "wrist": "robot0_eye_in_hand"}


@dataclass(frozen=True)
class RobosuiteConfig:
    task: str = "Lift"
    robots: str = "Panda"
    obs_mode: str = "state"  # state | rgb | state+rgb
    image_size: int = 64
    cameras: tuple[str, ...] = ("third", "wrist")
    control_hz: float = 20.0
    max_episode_steps: int = 100
    reward: str = "dense"  # dense (reward_shaping) | sparse
    terminate_on_success: bool = True
    controller: str | None = None  # robosuite composite controller name; None = robot default


def state_vector(obs: dict[str, np.ndarray]) -> np.ndarray:
    """robosuite observation dict -> flat float32 state (proprio, then object state if any)."""
    parts = [obs["robot0_proprio-state"]]
    if "object-state" in obs:
        parts.append(obs["object-state"])
    return np.concatenate(parts).astype(np.float32)


def camera_image(obs: dict[str, np.ndarray], cam: str) -> np.ndarray:
    """Our camera name -> robosuite ``<cam>_image``, flipped from OpenGL's bottom-up rows."""
    return np.ascontiguousarray(obs[f"{CAMERA_ALIASES.get(cam, cam)}_image"][::-1])


class RobosuiteSingle(SingleEnv):
    def __init__(self, cfg: RobosuiteConfig) -> None:
        import robosuite  # heavy (seconds); only when this bridge is used

        kwargs: dict[str, Any] = {}
        if cfg.controller is not None:
            from robosuite.controllers import load_composite_controller_config

            kwargs["controller_configs"] = load_composite_controller_config(
                controller=cfg.controller
            )
        if cfg.task not in robosuite.ALL_ENVIRONMENTS:
            raise ValueError(
                f"unknown robosuite task {cfg.task!r}; known: {sorted(robosuite.ALL_ENVIRONMENTS)}"
            )
        images = "rgb" in cfg.obs_mode
        self.cfg = cfg
        self.env = robosuite.make(
            cfg.task,
            robots=cfg.robots,
            has_renderer=False,
            has_offscreen_renderer=images,
            use_camera_obs=images,
            camera_names=[CAMERA_ALIASES.get(c, c) for c in cfg.cameras],
            camera_heights=cfg.image_size,
            camera_widths=cfg.image_size,
            control_freq=int(cfg.control_hz),
            horizon=10**9,
            ignore_done=True,
            hard_reset=False,
            reward_shaping=cfg.reward == "dense",
            seed=0,
            **kwargs,
        )
        low, high = self.env.action_spec
        self.low, self.high = np.asarray(low), np.asarray(high)
        self.instruction = f"robosuite {cfg.task}"

    @property
    def action_dim(self) -> int:
        return int(self.low.shape[0])

    def _obs(self, raw: dict[str, np.ndarray]) -> SingleObs:
        images = (
            {c: camera_image(raw, c) for c in self.cfg.cameras}
            if "rgb" in self.cfg.obs_mode
            else {}
        )
        return SingleObs(state_vector(raw), images, self.instruction)

    def reset(self, seed: int) -> SingleObs:
        # the placement sampler holds a reference to env.rng, so reseed it in place
        self.env.rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state
        return self._obs(self.env.reset())

    def step(self, action: np.ndarray) -> SingleStep:
        scaled = self.low + (np.asarray(action, np.float64) + 1.0) * 0.5 * (self.high - self.low)
        raw, reward, _, _ = self.env.step(scaled)
        return SingleStep(self._obs(raw), float(reward), bool(self.env._check_success()))

    def close(self) -> None:
        self.env.close()


@register_env("robosuite")
def make_robosuite_env(task: str = "Lift", num_envs: int = 1, **kwargs: Any) -> LoopVectorEnv:
    """Factory behind ``make_env("robosuite/<Task>", ...)``; kwargs are :class:`RobosuiteConfig`
    fields."""
    if isinstance(kwargs.get("cameras"), str):
        kwargs["cameras"] = (kwargs["cameras"],)
    cfg = RobosuiteConfig(task=task or "Lift", **kwargs)
    adapters = [RobosuiteSingle(cfg) for _ in range(num_envs)]
    probe = adapters[0].reset(0)
    spec = EnvSpec(
        num_envs=num_envs,
        state_dim=int(probe.state.shape[0]),
        action_dim=adapters[0].action_dim,
        cameras={c: (cfg.image_size, cfg.image_size) for c in cfg.cameras}
        if "rgb" in cfg.obs_mode
        else {},
        max_episode_steps=cfg.max_episode_steps,
        control_hz=cfg.control_hz,
        instruction=adapters[0].instruction,
    )
    return LoopVectorEnv(adapters, spec, terminate_on_success=cfg.terminate_on_success)
