"""A single-task Franka env (``mujoco_franka/<task>``, e.g. push) as the world of a ROS 2 twin.

Why the env itself (as :class:`~sim_bridges.mujoco_franka.twin.LanguageSceneTwin` does for the
language scenes): online RL on the twin must see the simulator's task — the same puck, goal
sampling, physics and success test — so the held-out eval on the simulator measures what the
twin trained. The robot node's MuJoCo arm adopts this env's model and data (``arms[*].scene:
mujoco_franka/<task>``) and asks it for what a lab's perception would report:

- ``object_positions()``: ``[1, 3]`` world position of the task's object (``[0, 3]`` without one),
  published on ``sim/objects``; the task node relays it as the object pose the policy client's
  ``object_pos`` / ``object_minus_ee`` / ``goal_minus_object`` features read;
- ``target_position()``: the task's goal marker (push: where the puck must go; reach: the target)
  or, for a task without one, the ``goal_pos`` its state reads (insert: the hole's top centre),
  sent in the ``sim/scene`` report and relayed by the task node on ``task/goal`` (``goal_pos``);
- ``success()``: the task's own success test on the current physics state;
- ``render(camera)``: a scene camera (``third``, ``wrist``) as the env renders its ``rgb``
  observations (same renderer settings, ``image_size`` px): the frames a camera-only policy and
  the reward classifier see on the twin, cube and goal marker included.

Episodes are the env's own reset (arm home + noise, object, goal; insert: the hole's random
pose and the arm over it with the peg in the hand), drawn as for held-out seed ``seed + k - 1``
like the language twin.

A task learnt with ``ee_impedance`` (insert) runs on the twin as the robot node's arm with
``control: ee_impedance``: the scene is the env's position-servo model (the arm holds between
episodes) and the arm's backend turns the servos into torque motors while its impedance law runs
on every physics step. ``compensates_bias`` asks that backend for the simulator's torque-loop
compensation (MuJoCo's whole bias force, :mod:`.torque_loop`) rather than a robot's gravity-only
one, so the twin's contact physics are the simulator's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim_bridges.mujoco_franka.tasks.base import body_pos
from sim_bridges.mujoco_franka.twin import EnvSceneTwin


class TaskSceneTwin(EnvSceneTwin):
    """One ``mujoco_franka/<task>`` env; ``fm`` / ``data`` are its MuJoCo state."""

    compensates_bias = True  # under an impedance law: the simulator's compensation (see above)

    def __init__(
        self, task: str = "push", seed: int = 0, control: str = "ee_delta_pos", image_size: int = 64
    ) -> None:
        from rlinf_contracts.env_registry import make_env

        env = make_env(
            f"mujoco_franka/{task}",
            num_envs=1,
            obs_mode="state",
            control=control,
            private_models=True,  # the arm backend rewrites its actuators under an impedance law
        )
        self._adopt(env, seed)
        self.task = self.env.task
        self.image_size = image_size
        self._rig: Any = None  # built on the first render (a state-only twin never renders)

    def render(self, camera: str) -> np.ndarray:
        """uint8 ``[image_size, image_size, 3]`` of ``camera`` as the env's ``rgb`` observation."""
        if self._rig is None:
            from sim_bridges.mujoco_franka.render import CameraRig, camera_id

            camera_id(self.fm, camera)  # a clear error naming the scene's cameras
            self._rig = CameraRig(self.image_size, self.image_size, self.env.cfg.robot_look)
        return self._rig.render([self.fm], [self.data], camera, [None])[0].copy()

    @property
    def instruction(self) -> str:
        return str(self.task.instruction)

    def object_positions(self) -> np.ndarray:
        """``[K, 3]`` world positions of the task's objects (K = 1 for push / lift, 0 for reach)."""
        if not self.task.needs_object:
            return np.zeros((0, 3))
        return body_pos(self.fm, self.data, "object").copy()[None]

    def target_position(self) -> np.ndarray:
        """World position of the task's goal marker; without one the ``goal_pos`` its state
        reads (insert: the hole's top centre), else the object itself."""
        if self.task.markers:
            return self.data.mocap_pos[self.fm.marker_mocap[self.task.markers[0]]].copy()
        goal = _feature_slice(self.task, "goal_pos")
        if goal is not None:
            return self.task.features(self.fm, self.data, self.ee_position())[goal].copy()
        return self.object_positions()[0]

    def ee_position(self) -> np.ndarray:
        return self.data.site_xpos[self.fm.ee_site].copy()

    def success(self) -> bool:
        """The simulator's success test of the task on the current physics state."""
        return bool(self.task.evaluate(self.fm, self.data, self.ee_position())[0])

    def state(self) -> np.ndarray:
        """The simulator's state vector of the current physics state (what its policy sees)."""
        self.env._refresh(np.array([0]))
        return np.asarray(self.env._state(0), dtype=np.float64).copy()

    def close(self) -> None:
        if self._rig is not None:
            self._rig.close()
        self.env.close()


def _feature_slice(task: Any, name: str) -> slice | None:
    """Where the task feature ``name`` sits in ``task.features(...)`` (None if it has none)."""
    offset = 0
    for f in task.state_fields:
        if f.name == name:
            return slice(offset, offset + f.size)
        offset += f.size
    return None
