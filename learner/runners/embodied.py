"""The on-policy embodied runner (PPO / GRPO), as one short dataflow per iteration::

    weights(v) --> rollout --(actions)--> env --(obs, reward)--> rollout --(trajectories)--> actor
       ^                                                                                      |
       +----------------------------------- publish v+1 --------------------------------------+

The placement alone picks how that runs (see ``learner.runners.topology``): fused in one
process per rank when collocated, or env / rollout / actor groups joined by channels, with
``rollout.pipeline_stages`` micro-batches overlapping env stepping and inference.

Determinism: every worker reseeds per iteration from ``(seed, component, rank|stream,
iteration)`` and envs are reset from seeded states at the first iteration and right after
each checkpoint, so resuming from a checkpoint replays the uninterrupted run exactly.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from learner.checkpoint import checkpoint_dir, load_policy
# imported before any cluster starts: it picks a headless MuJoCo GL default that workers inherit
from learner.eval.embodied import evaluate_config
from learner.placement import parse_placement
from learner.runners.config import EmbodiedConfig
from learner.runners.registry import RUNNERS, RunnerSpec
from learner.runners.topology import COMPONENTS, TOPOLOGIES, IterationOutput, topology_name

log = logging.getLogger(__name__)


def steps_per_iteration(cfg: EmbodiedConfig, max_episode_steps: int) -> int:
    """With a critic: the configured rollout length; outcome estimators (GRPO...): long enough for
    every row to finish one episode."""
    if cfg.algorithm.single_episode:
        return math.ceil(max_episode_steps / cfg.model.chunk)
    return cfg.rollout.steps_per_iteration


def needs_reset(cfg: EmbodiedConfig, iteration: int, start: int) -> bool:
    every = cfg.train.checkpoint_every
    return iteration == start or cfg.algorithm.single_episode or (every > 0 and iteration % every == 0)


def iteration_metrics(out: IterationOutput, env_steps: int, total_steps: int, seconds: float,
                      recent: deque[bool]) -> dict[str, float]:
    """This iteration's numbers; ``success_rate`` is over the last ``recent.maxlen`` episodes
    (a per-iteration rate jumps around with the few episodes that happen to end in it)."""
    recent.extend(out.stats.successes)
    m: dict[str, float] = {f"iter/{k}": v for k, v in out.stats.summary().items()}
    if recent:
        m["success_rate"] = float(sum(recent) / len(recent))
    if out.stats.returns:
        m["episode_return"] = m["iter/episode_return"]
    m.update({"env_steps": float(total_steps), "env_steps_per_s": env_steps / max(seconds, 1e-9),
              "iteration_s": seconds, "weight_version": float(out.weight_version)})
    m.update({f"train/{k}": v for k, v in out.train.items()})
    m.update({f"time/{k}": v for k, v in out.timings.items()})
    return m


class _Run:
    """Holds the topology and the weight store of one ``run`` call."""

    def __init__(self, cfg: EmbodiedConfig, cluster: Any) -> None:
        from learner.weights import WeightStore

        self.cfg = cfg
        self.placement = parse_placement(cfg.placement, cluster.num_slots, list(COMPONENTS))
        self.store_name = f"{cfg.name}-weights-{uuid.uuid4().hex[:8]}"
        self.store = WeightStore.create(self.store_name)
        name = topology_name(cfg, self.placement)
        log.info("placement %s -> %s topology", self.placement.describe(), name)
        try:
            self.topo = TOPOLOGIES.get(name)(cfg, cluster, self.placement, self.store_name)
        except BaseException:
            self.store.close()
            raise
        self.trainers = self.topo.trainers

    def prepare(self) -> tuple[int, int]:
        """Process group, resume, initial publish; returns (start iteration, weight version)."""
        if self.trainers.size > 1:
            address = self.trainers.execute_on([0], "dist_address").wait()[0]
            self.trainers.call("init_dist", address).wait()
        start = 0
        if self.cfg.train.resume:
            meta = self.trainers.call("load", self.cfg.train.resume).wait()[0]
            start = int(meta["iteration"])
            log.info("resumed from %s at iteration %d (weight version %d)",
                     self.cfg.train.resume, start, meta["weight_version"])
        version = self.trainers.execute_on([0], "publish").wait()[0]
        return start, version

    def save(self, iteration: int, metrics: dict[str, float]) -> Path:
        path = checkpoint_dir(self.cfg.train.out_dir, iteration)
        self.trainers.execute_on([0], "save", str(path), iteration, metrics).wait()
        return path


def run(cfg: EmbodiedConfig, cluster: Any) -> dict[str, Any]:
    """Train per ``cfg`` on ``cluster``; returns the final metrics (incl. held-out eval)."""
    from learner.metrics import MetricsLogger

    r = _Run(cfg, cluster)
    logger = None
    try:
        start, version = r.prepare()
        steps = steps_per_iteration(cfg, r.topo.env_spec.max_episode_steps)
        env_steps = steps * cfg.env.num_envs * cfg.model.chunk
        logger = MetricsLogger(cfg.train.out_dir, cfg.train.iterations, start, cfg.train.tensorboard,
                               cfg.train.progress, desc=cfg.name)
        metrics: dict[str, float] = {"weight_version": float(version)}
        last_saved = start if (checkpoint_dir(cfg.train.out_dir, start) / "meta.json").exists() else -1
        recent: deque[bool] = deque(maxlen=100)
        t_start = time.perf_counter()
        last = start
        for it in range(start, cfg.train.iterations):
            if cfg.train.time_budget_s is not None and time.perf_counter() - t_start > cfg.train.time_budget_s:
                log.info("train.time_budget_s=%s reached after %d iterations", cfg.train.time_budget_s, it)
                break
            t0 = time.perf_counter()
            out = r.topo.iterate(it, needs_reset(cfg, it, start), steps)
            metrics = iteration_metrics(out, env_steps, env_steps * (it + 1), time.perf_counter() - t0, recent)
            logger.log(it, metrics)
            if cfg.train.checkpoint_every and (it + 1) % cfg.train.checkpoint_every == 0:
                r.save(it + 1, metrics)
                last_saved = it + 1
            last = it + 1
        final_path = checkpoint_dir(cfg.train.out_dir, last)
        if last_saved != last:
            final_path = r.save(last, metrics)
        final = {**logger.last, "checkpoint": str(final_path), "placement_mode": r.placement.mode,
                 "topology": topology_name(cfg, r.placement)}
        if cfg.train.final_eval:
            final["eval"] = _final_eval(cfg, final_path)
        logger.write_json(final)
        return final
    finally:
        if logger is not None:
            logger.close()
        r.topo.shutdown()
        r.store.close()


def _final_eval(cfg: EmbodiedConfig, path: Path) -> dict[str, Any]:
    policy, _ = load_policy(path)
    video = str(Path(cfg.train.out_dir) / "eval.mp4") if cfg.eval.video else None
    return evaluate_config(policy, cfg, cfg.eval.episodes, seed=0, video_path=video)


RUNNERS.add("embodied", RunnerSpec(config_cls=EmbodiedConfig, run=run))
__all__ = ["run", "EmbodiedConfig"]
