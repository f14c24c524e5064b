"""LIBERO bridge: ``make_env("libero/libero_spatial", num_envs=4, task_id=0)``.

LIBERO suites (libero_spatial / object / goal / 10 / 90) are robosuite-1.4 scenes described by
BDDL files, each task with 50 fixed initial states. The adapter loads a suite's task, resets to
initial state ``k`` (env ``i`` of a ``reset(seed)`` gets ``(seed + i) % 50``; auto-resets walk on
through the 50), waits a few no-op steps for objects to settle (as openpi's LIBERO client
does), and maps observations to the canonical map the way openpi's LIBERO example does:
``state`` = eef position (3) + eef axis-angle (3) + gripper finger positions (2) = 8 floats;
``images`` ``third`` = agentview, ``wrist`` = eye-in-hand, both rotated 180 degrees;
``instruction`` = the task's language string. Actions are LIBERO's native 7-D OSC deltas with
gripper -1 = open, +1 = close (kept native so published LIBERO policies run unchanged).

Not run here: LIBERO pins robosuite 1.4 while this project uses robosuite 1.5, and it is not on
PyPI as a wheel. The pure mapping is unit-tested; the env path raises a clear ImportError.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlinf_contracts.env import EnvSpec
from rlinf_contracts.env_registry import register_env
from rlinf_contracts.rotations import quat_xyzw_to_rotvec
from sim_bridges.loop_env import LoopVectorEnv, SingleEnv, SingleObs, SingleStep

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
MAX_STEPS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
NOOP_ACTION = np.array([0, 0, 0, 0, 0, 0, -1.0])
CAMERAS = {"third": "agentview_image", "wrist": "robot0_eye_in_hand_image"}


@dataclass(frozen=True)
class LiberoConfig:
    suite: str = "libero_spatial"
    task_id: int = 0
    image_size: int = 224
    cameras: tuple[str, ...] = ("third", "wrist")
    max_episode_steps: int | None = None  # None -> the suite's usual budget
    settle_steps: int = 10


def libero_state(obs: dict[str, np.ndarray]) -> np.ndarray:
    """openpi's 8-D LIBERO state: eef pos, eef axis-angle, gripper finger positions."""
    return np.concatenate(
        [
            obs["robot0_eef_pos"],
            quat_xyzw_to_rotvec(obs["robot0_eef_quat"]),
            obs["robot0_gripper_qpos"],
        ]
    ).astype(np.float32)


def libero_images(obs: dict[str, np.ndarray], cameras: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Camera images rotated 180 degrees (LIBERO renders them upside down and mirrored)."""
    return {c: np.ascontiguousarray(obs[CAMERAS[c]][::-1, ::-1]) for c in cameras}


def init_state_index(seed: int, num_states: int) -> int:
    return int(seed) % num_states


class LiberoSingle(SingleEnv):  # pragma: no cover - needs LIBERO
    def __init__(self, cfg: LiberoConfig) -> None:
        from libero.libero import benchmark, get_libero_path
        from libero.libero.envs import OffScreenRenderEnv

        suite = benchmark.get_benchmark_dict()[cfg.suite]()
        task = suite.get_task(cfg.task_id)
        self.init_states = suite.get_task_init_states(cfg.task_id)
        bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
        self.env = OffScreenRenderEnv(
            bddl_file_name=bddl, camera_heights=cfg.image_size, camera_widths=cfg.image_size
        )
        self.cfg, self.instruction, self._k = cfg, task.language, 0

    def _obs(self, raw: dict) -> SingleObs:
        return SingleObs(libero_state(raw), libero_images(raw, self.cfg.cameras), self.instruction)

    def reset(self, seed: int) -> SingleObs:
        self.env.seed(seed)
        self.env.reset()
        raw = self.env.set_init_state(
            self.init_states[init_state_index(seed, len(self.init_states))]
        )
        for _ in range(self.cfg.settle_steps):
            raw, *_ = self.env.step(NOOP_ACTION)
        return self._obs(raw)

    def step(self, action: np.ndarray) -> SingleStep:
        raw, reward, done, _ = self.env.step(np.asarray(action, np.float64))
        return SingleStep(self._obs(raw), float(reward), bool(done))

    def close(self) -> None:
        self.env.close()


@register_env("libero")
def make_libero_env(
    task: str = "libero_spatial", num_envs: int = 1, **kwargs: Any
) -> LoopVectorEnv:
    suite = task or "libero_spatial"
    if suite not in SUITES:
        raise ValueError(f"unknown LIBERO suite {suite!r}; use one of {SUITES}")
    if importlib.util.find_spec("libero") is None:
        raise ImportError(
            "the libero bridge needs LIBERO (github.com/Lifelong-Robot-Learning/LIBERO, "
            "installed from source with robosuite 1.4 in its own environment); it is not "
            "installed here"
        )
    cfg = LiberoConfig(suite=suite, **kwargs)  # pragma: no cover - below needs LIBERO
    adapters = [LiberoSingle(cfg) for _ in range(num_envs)]
    spec = EnvSpec(
        num_envs=num_envs,
        state_dim=8,
        action_dim=7,
        cameras={c: (cfg.image_size, cfg.image_size) for c in cfg.cameras},
        max_episode_steps=cfg.max_episode_steps or MAX_STEPS[suite],
        control_hz=20.0,
        instruction=adapters[0].instruction,
    )
    return LoopVectorEnv(adapters, spec, terminate_on_success=True)
