"""The embodied halves of the env and rollout roles: env shards stepping, policy sampling.

Hosted by :class:`~learner.rollout.workers.EnvWorker` and
:class:`~learner.rollout.workers.RolloutWorker`, joined by the channels of a
:class:`~learner.rollout.streams.StreamLayout`.

Pipelining: an env side holds ``stages`` env shards. It sends every shard's obs, then for each
step waits for shard k's actions, steps shard k and sends its next obs. While it steps shard k
the sampler is already inferring shard k+1, so with ``stages >= 2`` env and inference overlap
instead of taking turns.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from learner.models import PolicySpec
from learner.models.policy import executable
from learner.roles import weights_digest
from learner.rollout.collect import draw_prefix, policy_step, sampling_seed, value_of
from learner.rollout.envs import StageEnvs
from learner.rollout.revisit import FailedStates
from learner.rollout.streams import EnvMessage, StreamLayout
from learner.rollout.trajectory import EpisodeStats, TrajectoryBuilder, split_rows
from learner.runners.config import EmbodiedConfig

__all__ = ["EnvStepper", "PolicySampler", "make_stage_envs"]


def make_stage_envs(cfg: EmbodiedConfig, world_size: int) -> StageEnvs:
    """This rank's share of ``env.num_envs``, split into pipeline stages (and GRPO groups)."""
    stages = cfg.rollout.pipeline_stages
    if cfg.env.num_envs % (world_size * stages):
        raise ValueError(
            f"env.num_envs={cfg.env.num_envs} must be divisible by env processes "
            f"({world_size}) x rollout.pipeline_stages ({stages})"
        )
    per_stage, alg = cfg.env.num_envs // (world_size * stages), cfg.algorithm
    revisit = None
    if alg.revisit_share > 0:  # queue bound: one iteration's groups of this worker
        revisit = FailedStates(
            alg.revisit_share, alg.revisit_times, stages * per_stage // alg.env_group_size
        )
    return StageEnvs(
        cfg.env.name, per_stage, stages, alg.env_group_size, revisit, **cfg.env.factory_kwargs()
    )


class EnvStepper:
    """This rank's env shards: obs out, actions in, one step per message."""

    def __init__(
        self, cfg: EmbodiedConfig, layout: StreamLayout, rank: int = 0, world_size: int = 1
    ) -> None:
        self.cfg, self.layout = cfg, layout
        self.envs = make_stage_envs(cfg, world_size)
        self.spec = self.envs.spec
        self.streams = [rank * layout.stages + k for k in range(layout.stages)]

    def run_iteration(self, iteration: int, reset: bool, steps: int) -> dict[str, float]:
        lay = self.layout
        if reset:
            self.envs.reset(self.cfg.seed, iteration, self.streams[0])
        for k, s in enumerate(self.streams):
            lay.obs.put(
                EnvMessage(s, self.envs.obs[k], None), key=lay.rollout_key(s), timeout=lay.timeout
            )
        busy = 0.0
        for _ in range(steps):
            for k, s in enumerate(self.streams):
                actions = lay.actions.get(key=lay.action_key(s), timeout=lay.timeout)
                t0 = time.perf_counter()
                out = self.envs.step(k, actions)
                busy += time.perf_counter() - t0
                lay.obs.put(
                    EnvMessage(s, self.envs.obs[k], out),
                    key=lay.rollout_key(s),
                    timeout=lay.timeout,
                )
        revisited = self.envs.revisited * self.envs.group_size if reset else 0
        return {"env_busy_s": busy, "revisited_episodes": revisited}

    def close(self) -> None:
        self.envs.close()


class PolicySampler:
    """The policy of this rollout rank: actions for its streams, trajectories to the actors."""

    timeout = None  # the actor publishes before every iteration: the newest version suffices

    def __init__(
        self,
        cfg: EmbodiedConfig,
        spec: PolicySpec,
        layout: StreamLayout,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        from learner.actor.trainer import make_policy

        self.cfg, self.layout = cfg, layout
        self.policy = make_policy(cfg, spec)
        self.version = -1
        self.streams = layout.streams_of_rollout(rank)
        self.group_size = cfg.algorithm.env_group_size

    @property
    def weight_version(self) -> int:
        return self.version

    def load_weights(self, state: dict[str, torch.Tensor], version: int) -> None:
        self.policy.load_state_dict(state)
        self.version = version

    def onload(self) -> None:
        """CPU policy: nothing to move."""

    def offload(self) -> None:
        """CPU policy: nothing to move."""

    def digest(self) -> str:
        return weights_digest(self.policy)

    def run_iteration(self, iteration: int, steps: int, envs_per_stream: int) -> dict[str, Any]:
        lay, cfg = self.layout, self.cfg
        single = cfg.algorithm.single_episode
        keep = self.policy.spec.uses_instruction
        builders = {
            s: TrajectoryBuilder(envs_per_stream, cfg.algorithm.gamma, single, keep)
            for s in self.streams
        }
        prefixes = {
            s: draw_prefix(
                envs_per_stream,
                self.group_size,
                cfg.algorithm.shared_prefix,
                seed=cfg.seed,
                stream=s,
                iteration=iteration,
            )
            for s in self.streams
        }
        busy, stats = 0.0, EpisodeStats()
        for _ in range(len(self.streams) * (steps + 1)):
            msg: EnvMessage = lay.obs.get(key=lay.rollout_key(self.streams[0]), timeout=lay.timeout)
            t0 = time.perf_counter()
            b = builders[msg.stream]
            if msg.outcome is not None:
                b.add_outcome(msg.outcome, value_of(self.policy, msg.outcome.final_obs))
            if b.steps < steps:
                torch.manual_seed(sampling_seed(cfg.seed, msg.stream, iteration, b.steps))
                actions, logp, value = policy_step(self.policy, msg.obs)
                prefix = prefixes[msg.stream]
                credit = None if prefix is None else prefix.apply(b.steps, actions, logp)
                b.add_step(msg.obs, actions, logp, value, credit)
                busy += time.perf_counter() - t0
                lay.actions.put(
                    executable(actions, self.policy.spec.action_dim),
                    key=lay.action_key(msg.stream),
                    timeout=lay.timeout,
                )
            else:
                traj = b.finish(value_of(self.policy, msg.obs))
                stats.extend(traj.stats)
                shards = split_rows(traj, lay.n_actor, self.group_size)
                busy += time.perf_counter() - t0
                for a, shard in enumerate(shards):
                    lay.trajectories.put(
                        (msg.stream, shard), key=lay.actor_key(a), timeout=lay.timeout
                    )
        return {"stats": stats, "infer_busy_s": busy, "weight_version": self.version}
