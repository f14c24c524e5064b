"""Datasets of the offline runner, read from the episode store, and DAgger's oracle rollouts.

IQL samples a one-step :class:`~rlinf_data.replay.ReplayBuffer` filled with every stored
episode (``discount`` = gamma, 0 after a terminal step; truncated episodes bootstrap from their
final observation). BC and DAgger use :class:`~learner.algorithms.imitation.DaggerBuffer`:
demonstrations first, then states the learner visited labelled by the simulator's oracle
(``sim_bridges.mujoco_franka.oracle_action``, the expert of DAgger).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from learner.algorithms.imitation import DaggerBuffer, dagger_mix
from rlinf_contracts.config import ConfigError
from rlinf_contracts.episode import Episode
from rlinf_data.demos import open_demos
from rlinf_data.replay import ReplayBuffer, ReplayConfig


def read_episodes(path: str) -> list[Episode]:
    """The episodes of ``data.demos`` with a step (:mod:`rlinf_data.demos`, the one reader)."""
    return open_demos(path, key="data.demos").episodes()


def check_layout(episodes: list[Episode], env_spec: Any, path: str) -> None:
    ep = episodes[0].info.layout
    if (ep.state_dim, ep.action_dim) != (env_spec.state_dim, env_spec.action_dim):
        raise ConfigError(
            f"key 'data.demos': episodes in {path} have state {ep.state_dim} / action "
            f"{ep.action_dim}, the env has {env_spec.state_dim} / {env_spec.action_dim}; record "
            "them with the same env.obs_mode and env.control"
        )


def replay_of(episodes: list[Episode], gamma: float) -> ReplayBuffer:
    """Every episode in a one-step replay (the IQL dataset)."""
    rows = sum(len(ep) + 1 for ep in episodes)
    replay = ReplayBuffer(
        episodes[0].info.layout,
        ReplayConfig(capacity=max(2, rows), mix={"demo": 1.0}, n_step=1, gamma=gamma),
    )
    for ep in episodes:
        replay.add_episode(ep, "demo")
    return replay


def bc_buffer(episodes: list[Episode]) -> DaggerBuffer:
    buf = DaggerBuffer()
    buf.add_demos(
        torch.as_tensor(np.concatenate([ep.steps["state"] for ep in episodes])),
        torch.as_tensor(np.concatenate([ep.steps["action"] for ep in episodes])),
    )
    return buf


@torch.no_grad()
def oracle_round(
    env: Any, policy: Any, buf: DaggerBuffer, steps: int, beta: float, generator: torch.Generator
) -> dict[str, float]:
    """Roll out the learner (the expert's action with probability ``beta`` per row), label every
    visited state with the oracle's action, aggregate; returns the round's episode success rate."""
    from sim_bridges.mujoco_franka import oracle_action

    obs, visited, labels, successes = env.reset(int(generator.initial_seed()) % (2**31)), [], [], []
    for _ in range(max(1, steps // env.num_envs)):
        expert = torch.as_tensor(oracle_action(env))
        mine = policy.distribution(policy.encoder(torch.as_tensor(obs["state"]))).mode()
        action, _ = dagger_mix(mine, expert, beta, generator)
        visited.append(torch.as_tensor(obs["state"]))
        labels.append(expert)
        obs, _, term, trunc, info = env.step(action.numpy())
        done = np.asarray(term) | np.asarray(trunc)
        successes += list(np.asarray(info["success"])[done])
    buf.add_relabelled(torch.cat(visited), torch.cat(labels))
    return {
        "dagger/round_success": float(np.mean(successes)) if successes else 0.0,
        "dagger/dataset": float(len(buf)),
    }
