"""Policy-side steps shared by the fused loop and the rollout worker, plus the fused loop.

``collect_inline`` is the whole rollout in one process (env stepping and inference take
turns); the rollout worker does the same per message, with the env in another process.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import torch

from learner.models import Policy, obs_to_tensors
from learner.models.policy import executable
from learner.rollout.branching import SharedPrefix
from learner.rollout.envs import StageEnvs
from learner.rollout.trajectory import Trajectory, TrajectoryBuilder, collate
from rlinf_contracts.env import Observation


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from any parts (``derive_seed(seed, "rollout", rank, iteration)``).

    Why per-iteration seeds: every worker reseeds at the start of each iteration, so a run
    resumed at iteration k draws exactly the random numbers the uninterrupted run drew.
    """
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch global RNGs; return a torch Generator on the same seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def policy_step(policy: Policy, obs: Observation) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample actions: ``(actions [B, chunk, A], logp [B], value [B])``."""
    actions, logp, value = policy.act(obs, deterministic=False)
    if value is None:
        value = np.zeros(len(logp), np.float32)
    return actions, logp, value


@torch.no_grad()
def value_of(policy: Policy, obs: Observation | None) -> np.ndarray | None:
    if obs is None or len(obs["state"]) == 0:
        return None
    out = policy(obs_to_tensors(obs, next(policy.parameters()).device))
    return None if out.value is None else out.value.float().cpu().numpy()


def sampling_seed(seed: int, stream: int, iteration: int, step: int) -> int:
    """Seed of the action sample of one (stream, step): identical in fused and channel modes,
    and independent of the order in which a rollout worker receives its streams' messages."""
    return derive_seed(seed, "rollout", stream, iteration, step)


def draw_prefix(
    num_envs: int, group_size: int, max_steps: int, *, seed: int, stream: int, iteration: int
) -> SharedPrefix | None:
    """A stream's shared-prefix lengths for one iteration (same in fused and channel modes)."""
    return SharedPrefix.draw(
        num_envs, group_size, max_steps, derive_seed(seed, "prefix", stream, iteration)
    )


def collect_inline(
    policy: Policy,
    stages: StageEnvs,
    steps: int,
    gamma: float,
    *,
    seed: int,
    iteration: int,
    first_stream: int,
    single_episode: bool = False,
    shared_prefix: int = 0,
) -> Trajectory:
    """Run ``steps`` policy steps on every stage env; stage order is the batch order.

    ``shared_prefix`` > 0: each group's members replay their leader's first 0..shared_prefix
    actions (:mod:`learner.rollout.branching`)."""
    n = stages.spec.num_envs
    keep = policy.spec.uses_instruction
    builders = [TrajectoryBuilder(n, gamma, single_episode, keep) for _ in stages.envs]
    prefixes = [
        draw_prefix(
            n,
            stages.group_size,
            shared_prefix,
            seed=seed,
            stream=first_stream + k,
            iteration=iteration,
        )
        for k in range(len(stages.envs))
    ]
    for t in range(steps):
        for k in range(len(stages.envs)):
            obs = stages.obs[k]
            torch.manual_seed(sampling_seed(seed, first_stream + k, iteration, t))
            actions, logp, value = policy_step(policy, obs)
            credit = None if prefixes[k] is None else prefixes[k].apply(t, actions, logp)
            builders[k].add_step(obs, actions, logp, value, credit)
            out = stages.step(k, executable(actions, policy.spec.action_dim))
            builders[k].add_outcome(out, value_of(policy, out.final_obs))
    boot = [value_of(policy, stages.obs[k]) for k in range(len(stages.envs))]
    return collate([b.finish(v if v is not None else np.zeros(n)) for b, v in zip(builders, boot)])
