"""Fused worker: env, rollout and actor of one rank in one process, no channels.

Why: on a few CPU cores, a collocated placement gains nothing from separate processes (they
would time-share the same cores) but pays a channel round trip per env step. Fusing keeps the
collocated semantics (same slots, same data, same updates) at in-process cost; several ranks
train data-parallel with averaged gradients.
"""

from __future__ import annotations

import time
from typing import Any

from learner.actor.trainer import Trainer, TrainerHost, policy_spec
from learner.rollout.collect import collect_inline
from learner.rollout.workers import make_stage_envs
from learner.runners.config import EmbodiedConfig
from learner.worker import Worker


class FusedWorker(TrainerHost, Worker):
    def __init__(self, cfg: EmbodiedConfig, store_name: str) -> None:
        from learner.weights import WeightStore

        self.cfg = cfg
        self.envs = make_stage_envs(cfg, self.world_size)
        self.trainer = Trainer(cfg, policy_spec(cfg, self.envs.spec), self.rank, self.world_size)
        self.store = WeightStore.connect(store_name) if self.rank == 0 else None
        self.first_stream = self.rank * cfg.rollout.pipeline_stages

    def env_spec(self) -> Any:
        return self.envs.spec

    def run_iteration(self, iteration: int, reset: bool, steps: int) -> dict[str, Any]:
        cfg = self.cfg
        if reset:
            self.envs.reset(cfg.seed, iteration, self.first_stream)
        t0 = time.perf_counter()
        traj = collect_inline(self.trainer.policy, self.envs, steps, cfg.algorithm.gamma, seed=cfg.seed,
                              iteration=iteration, first_stream=self.first_stream,
                              single_episode=cfg.algorithm.single_episode)
        t1 = time.perf_counter()
        metrics = self.trainer.train(traj, iteration)
        t2 = time.perf_counter()
        return {"stats": traj.stats, "train": metrics, "rollout_s": t1 - t0, "train_s": t2 - t1,
                "weight_version": self.publish()}

    def close(self) -> None:
        self.envs.close()
