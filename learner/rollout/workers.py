"""Env and rollout workers: env stepping and batched inference, talking through channels.

Pipelining: an env worker holds ``stages`` env shards. It sends every shard's obs, then for
each step waits for shard k's actions, steps shard k and sends its next obs. While it steps
shard k the rollout worker is already inferring shard k+1, so with ``stages >= 2`` env and
inference overlap instead of taking turns.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from learner.models import PolicySpec
from learner.models.policy import executable
from learner.roles import WeightSubscriber
from learner.rollout.collect import draw_prefix, policy_step, sampling_seed, value_of
from learner.rollout.envs import StageEnvs
from learner.rollout.revisit import FailedStates
from learner.rollout.streams import EnvMessage, StreamLayout
from learner.rollout.trajectory import EpisodeStats, TrajectoryBuilder, split_rows
from learner.runners.config import EmbodiedConfig
from learner.worker import Worker


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


class EnvWorker(Worker):
    def __init__(self, cfg: EmbodiedConfig, layout: StreamLayout) -> None:
        self.cfg, self.layout = cfg, layout
        self.envs = make_stage_envs(cfg, self.world_size)
        self.streams = [self.rank * layout.stages + k for k in range(layout.stages)]

    def env_spec(self) -> Any:
        return self.envs.spec

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


class RolloutWorker(WeightSubscriber, Worker):
    def __init__(
        self, cfg: EmbodiedConfig, spec: PolicySpec, layout: StreamLayout, store_name: str
    ) -> None:
        from learner.actor.trainer import make_policy
        from learner.weights import WeightStore

        self.cfg, self.layout = cfg, layout
        self.policy = make_policy(cfg, spec)
        self.store = WeightStore.connect(store_name)
        self.version = -1
        self.streams = layout.streams_of_rollout(self.rank)
        self.group_size = cfg.algorithm.env_group_size

    @property
    def weight_version(self) -> int:
        return self.version

    def load_weights(self, state: dict[str, torch.Tensor], version: int) -> None:
        self.policy.load_state_dict(state)
        self.version = version

    def run_iteration(self, iteration: int, steps: int, envs_per_stream: int) -> dict[str, Any]:
        lay, cfg = self.layout, self.cfg
        self.sync_weights()
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
