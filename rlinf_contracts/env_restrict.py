"""An env whose state keeps only some named fields of its robot spec: a learner on a shared spec.

Why: robots of different specs feed one learner through a shared spec
(:mod:`rlinf_contracts.spec_shared`, ``rlinf spec --shared``): each robot runs the state fields
all of them have. The learner's network, its ingest layout and its held-out eval come from its
env's spec, so the env must present the same fields, in the same order. ``state_fields`` (an
env option every family with a robot spec takes: ``env.kwargs.state_fields`` in a run config)
does that by slicing the state vector, the final observations included; nothing else of the
env changes. The env's spec is the restricted one, so a checkpoint trained on it carries it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rlinf_contracts.env import EnvSpec, Observation, StepResult, VectorEnv
from rlinf_contracts.spec import SpecError


def _index(spec: EnvSpec, fields: Sequence[str]) -> tuple[np.ndarray, Any]:
    """The state columns of ``fields`` (in that order) and the spec restricted to them."""
    robot = spec.robot
    if robot is None:
        raise SpecError("state_fields needs an env with a robot spec (a named state layout)")
    if robot.arms != 1:
        raise SpecError(f"state_fields takes one-arm specs only; this one has {robot.arms} arms")
    slices = robot.state_slices()
    unknown = [f for f in fields if f not in slices]
    if unknown or not fields or len(set(fields)) != len(fields):
        raise SpecError(
            f"env option state_fields {list(fields)}: each once, from this env's state "
            f"{[f.name for f in robot.state]}" + (f"; unknown: {unknown}" if unknown else "")
        )
    by_name = {f.name: f for f in robot.state}
    cols = np.concatenate([np.arange(slices[f].start, slices[f].stop) for f in fields])
    restricted = replace(robot, state=tuple(by_name[f] for f in fields))
    return cols, replace(spec, state_dim=len(cols), robot=restricted)


class StateFieldsEnv(VectorEnv):
    """``env`` with its state vector cut to ``fields`` (see the module docstring).

    >>> from rlinf_contracts.spec import ActionSpace, RobotSpec, StateField
    >>> class Two(VectorEnv):
    ...     spec = EnvSpec(1, 5, 2, robot=RobotSpec(
    ...         (StateField("joint_pos", 3), StateField("goal_pos", 2)), ActionSpace("raw", 2)))
    ...     def reset(self, seed=None): return {"state": np.arange(5.0)[None]}
    ...     def step(self, actions): raise NotImplementedError
    >>> env = StateFieldsEnv(Two(), ["goal_pos", "joint_pos"])
    >>> env.reset()["state"].tolist(), env.spec.robot.describe().split(";")[0]
    ([[3.0, 4.0, 0.0, 1.0, 2.0]], 'state[5] = goal_pos(2) joint_pos(3)')
    """

    def __init__(self, env: VectorEnv, fields: Sequence[str]) -> None:
        self.env = env
        self.cols, self.spec = _index(env.spec, list(fields))

    def _cut(self, obs: Observation) -> Observation:
        return {**obs, "state": np.ascontiguousarray(np.asarray(obs["state"])[..., self.cols])}

    def reset(self, seed: int | Sequence[int] | None = None) -> Observation:
        return self._cut(self.env.reset(seed))

    def step(self, actions: np.ndarray) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        if "final_observation" in info:
            info = {**info, "final_observation": self._cut(info["final_observation"])}
        return self._cut(obs), reward, terminated, truncated, info

    def close(self) -> None:
        self.env.close()

    def render_frames(self) -> np.ndarray | None:
        return self.env.render_frames()

    def __getattr__(self, name: str) -> Any:  # family extras (e.g. a scene's options)
        return getattr(self.env, name)
