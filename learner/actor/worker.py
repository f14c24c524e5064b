"""Actor worker: trajectories in from the channel, PPO / GRPO update, weights out."""

from __future__ import annotations

import time
from typing import Any

from learner.actor.trainer import Trainer, TrainerHost
from learner.models import PolicySpec
from learner.rollout.streams import StreamLayout
from learner.rollout.trajectory import collate
from learner.runners.config import EmbodiedConfig
from learner.worker import Worker


class ActorWorker(TrainerHost, Worker):
    def __init__(
        self, cfg: EmbodiedConfig, spec: PolicySpec, layout: StreamLayout, store_name: str
    ) -> None:
        from learner.weights import WeightStore

        self.cfg, self.layout = cfg, layout
        self.trainer = Trainer(cfg, spec, self.rank, self.world_size)
        self.store = WeightStore.connect(store_name) if self.rank == 0 else None

    def run_iteration(self, iteration: int) -> dict[str, Any]:
        """Train on this rank's shard of every stream (rows split by the rollout workers)."""
        lay = self.layout
        items = lay.trajectories.get_batch(
            lay.n_streams, key=lay.actor_key(self.rank), timeout=lay.timeout
        )
        t0 = time.perf_counter()
        traj = collate([t for _, t in sorted(items, key=lambda item: item[0])])
        metrics = self.trainer.train(traj, iteration)
        busy = time.perf_counter() - t0
        return {"train": metrics, "train_busy_s": busy, "weight_version": self.publish()}
