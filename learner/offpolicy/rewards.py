"""Online rewards of the ``remote`` topology: ``ingest.reward`` -> reward of a streamed episode.

A registry of its own, below the config and the remote learner: the config checks the name
(``robot_sections.IngestSection.validate``) and the remote learner uses the function, and neither
has to import the other for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlinf_contracts.config import ConfigError
from rlinf_contracts.episode import Episode
from rlinf_contracts.registry import Registry

REWARDS: Registry[Any] = Registry("online reward")  # name -> (robot spec) -> (episode -> rewards)


@REWARDS.register("stream")
def _stream_reward(spec: Any) -> Any:
    """The reward the robot sent (its judge's success flag, a classifier, the human's keys)."""
    return lambda ep: ep.steps["reward"]


def _state_slice(spec: Any, name: str, key: str) -> slice:
    """Where state field ``name`` sits in the robot spec's state (a clear error naming ``key``
    if absent)."""
    offset = 0
    for f in getattr(spec, "state", ()) if spec is not None else ():
        if f.name == name:
            return slice(offset, offset + f.size)
        offset += f.size
    raise ConfigError(
        f"key 'ingest.reward'={key} needs a {name!r} field in the robot spec's state; use 'stream' "
        "for this robot"
    )


def _next_states(ep: Episode) -> np.ndarray:
    """The state after each step (the episode's final observation after the last one)."""
    return (
        np.concatenate([ep.steps["state"][1:], ep.final["state"][None]])
        if ep.final is not None
        else ep.steps["state"]
    )


@REWARDS.register("goal_distance")
def _goal_distance_reward(spec: Any) -> Any:
    """The simulator's reach reward on robot data: the streamed reward (1 on success) minus the
    distance to the goal after each step, read from the state's ``goal_minus_ee`` field. Why:
    with a sparse success flag alone, 20 short demos leave most of the arm's space without
    signal."""
    sl = _state_slice(spec, "goal_minus_ee", "goal_distance")

    def reward(ep: Episode) -> np.ndarray:
        return (ep.steps["reward"] - np.linalg.norm(_next_states(ep)[:, sl], axis=1)).astype(
            np.float32
        )

    return reward


@REWARDS.register("push_distance")
def _push_distance_reward(spec: Any) -> Any:
    """The simulator's push reward on robot data (``mujoco_franka/push``): the streamed reward (1 on
    success) minus the hand-to-cube distance and twice the cube-to-goal distance in the table plane,
    from the next state's ``object_minus_ee`` / ``goal_minus_object`` fields."""
    reach = _state_slice(spec, "object_minus_ee", "push_distance")
    goal = _state_slice(spec, "goal_minus_object", "push_distance")

    def reward(ep: Episode) -> np.ndarray:
        nxt = _next_states(ep)
        dense = np.linalg.norm(nxt[:, reach], axis=1) + 2.0 * np.linalg.norm(
            nxt[:, goal][:, :2], axis=1
        )
        return (ep.steps["reward"] - dense).astype(np.float32)

    return reward


@REWARDS.register("insert_depth")
def _insert_depth_reward(spec: Any) -> Any:
    """The simulator's peg-insertion reward on robot data (``mujoco_franka/insert``): the streamed
    reward (1 on success) minus twice the peg tip's lateral distance from the hole axis and its
    height above the success depth. The tip is not in the state but rigidly in the hand: ``PEG_TIP``
    along the tool axis from the next state's ``ee_pos`` / ``ee_rot6d``; the hole's top centre is
    its ``goal_pos``."""
    from rlinf_contracts.rotations import rot6d_to_matrix
    from sim_bridges.mujoco_franka.tasks.insert import PEG_TIP, insert_reward

    ee = _state_slice(spec, "ee_pos", "insert_depth")
    rot = _state_slice(spec, "ee_rot6d", "insert_depth")
    goal = _state_slice(spec, "goal_pos", "insert_depth")

    def reward(ep: Episode) -> np.ndarray:
        nxt = _next_states(ep).astype(np.float64)
        tip = nxt[:, ee] + rot6d_to_matrix(nxt[:, rot]) @ np.array([0.0, 0.0, PEG_TIP])
        _, dense = insert_reward(tip, nxt[:, goal])
        return (ep.steps["reward"] + dense).astype(np.float32)

    return reward
