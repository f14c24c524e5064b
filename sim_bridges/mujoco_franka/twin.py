"""The language scene as the world of a ROS 2 twin: one ``franka_language`` env the robot node
steps.

Why the env itself and not a second copy of its scene: the twin must show the policy what the
simulator showed it — the same objects, per-episode colours, lighting, camera and success test.
The robot node's MuJoCo arm backend adopts this env's model and data (``robot_drivers.sim_arm``,
``scene:``), advances its physics in real time under the arm's commands, and asks it for the
things a lab would get from perception: the instruction of the episode, object positions and
camera frames. Episodes are sampled by the env's own reset (layout, colours, instruction).
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from sim_bridges.mujoco_franka.tasks.language import SLOTS


class EnvSceneTwin:
    """What every twin world shares: a one-env simulator whose MuJoCo ``fm`` / ``data`` the robot
    node's arm adopts, its control step, and episodes replayed by held-out seed.

    Why one base: the language and single-task twins must reset and step exactly as the simulator
    does, so the seed arithmetic and the control period live in one place."""

    def _adopt(self, env: Any, seed: int) -> None:
        self.env = env
        self.env.reset(seed=seed)
        self.fm, self.data = self.env.fms[0], self.env.datas[0]
        # one control step of the simulator: substeps physics steps of the env's timestep
        self.substeps = int(self.env.substeps)
        self.control_period_s = float(self.env.substeps * self.fm.model.opt.timestep)
        self.seed = seed
        self.episodes = 0

    def new_episode(self, number: int | None = None) -> None:
        """The simulator's reset of this env as episode ``number`` (default: the next): arm home
        (+ the simulator's noise) and the task's objects, drawn as for seed ``seed + number -
        1``."""
        number = self.episodes + 1 if number is None else int(number)
        self.env._rngs[0] = np.random.default_rng(self.seed + number - 1)
        self.env._reset_one(0)
        mujoco.mj_forward(self.fm.model, self.data)
        self.episodes = number


class LanguageSceneTwin(EnvSceneTwin):
    """One ``franka_language/<mix>`` env on split ``split``; ``fm`` / ``data`` are its MuJoCo
    state."""

    def __init__(
        self, mix: str = "mix", split: str = "id", image_size: int = 64, seed: int = 0
    ) -> None:
        """``seed``: episode ``k`` (1, 2, ...) is the one ``rlinf eval`` draws for held-out seed
        ``seed + k - 1`` (its env ``i`` of round ``r`` is reset with ``seed + r * n + i``), so a
        twin run with ``seed = eval.seed_offset`` replays the sim eval's episodes: same layouts,
        colours, instructions and start poses."""
        from rlinf_contracts.env_registry import make_env

        ood = {} if split in ("id", "train") else {"ood": split}
        self._adopt(
            make_env(
                f"franka_language/{mix}",
                num_envs=1,
                obs_mode="state+rgb",
                cameras=["front"],
                image_size=image_size,
                **ood,
            ),
            seed,
        )
        self.image_size = image_size

    @property
    def instruction(self) -> str:
        return self.env.task.episode(self.data).instruction

    def object_positions(self) -> np.ndarray:
        """``[3, 3]`` world positions of the slots ``obj0..obj2``."""
        return np.stack(
            [self.data.qpos[self.fm.object_qpos[n] : self.fm.object_qpos[n] + 3] for n in SLOTS]
        )

    def target_position(self) -> np.ndarray:
        return self.object_positions()[self.env.task.episode(self.data).target]

    def success(self) -> bool:
        """The simulator's success test of this episode on the current physics state."""
        ee = self.data.site_xpos[self.fm.ee_site].copy()
        return bool(self.env.task.evaluate(self.fm, self.data, ee)[0])

    def render(self, camera: str) -> np.ndarray:
        """uint8 ``[H, W, 3]`` of ``camera`` as the env renders its observation (episode
        colours)."""
        rig = self.env._rig
        return rig.render([self.fm], [self.data], camera, [self.env._visuals[0]])[0].copy()

    def close(self) -> None:
        self.env.close()
