"""The on-policy embodied runner (PPO / GRPO), as one short dataflow per iteration::

    weights(v) --> rollout --(actions)--> env --(obs, reward)--> rollout --(trajectories)--> actor
       ^                                                                                      |
       +----------------------------------- publish v+1 --------------------------------------+

The placement alone picks how that runs (see ``learner.runners.topology``): fused in one
process per rank when collocated, or env / rollout / actor groups joined by channels, with
``rollout.pipeline_stages`` micro-batches overlapping env stepping and inference. A fused
placement of one process runs in the calling process without Ray (:func:`in_process`).

Outputs in ``train.out_dir``: ``checkpoints/``, ``metrics.json`` (final + per-iteration history;
a resumed run appends to the earlier history), ``curves.png`` (success / return vs env steps
and wall time), TensorBoard scalars in ``tb/`` (``eval/<split>/...`` after the final eval).
``train.time_budget_s`` bounds training + final checkpoint + final eval
(``learner.runners.budget``).

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

# imported before any cluster starts: it picks a headless MuJoCo GL default that workers inherit
from learner.eval.embodied import final_eval
from learner.metrics import checkpoint_dir, prior_history, write_run
from learner.placement import parse_placement
from learner.runners.budget import Budget
from learner.runners.config import EmbodiedConfig
from learner.runners.registry import RUNNERS, RunnerSpec
from learner.runners.topology import (
    COMPONENTS,
    EMBODIED,
    IterationOutput,
    runs_in_process,
    topology_name,
)

log = logging.getLogger(__name__)


def steps_per_iteration(cfg: EmbodiedConfig, max_episode_steps: int) -> int:
    """With a critic: the configured rollout length; outcome estimators (GRPO...): long enough for
    every row to finish one episode."""
    if cfg.algorithm.single_episode:
        return math.ceil(max_episode_steps / cfg.model.chunk)
    return cfg.rollout.steps_per_iteration


def needs_reset(cfg: EmbodiedConfig, iteration: int, start: int) -> bool:
    every = cfg.train.checkpoint_every
    return (
        iteration == start or cfg.algorithm.single_episode or (every > 0 and iteration % every == 0)
    )


def iteration_metrics(
    out: IterationOutput, env_steps: int, total_steps: int, seconds: float, recent: deque[bool]
) -> dict[str, float]:
    """This iteration's numbers; ``success_rate`` is over the last ``recent.maxlen`` episodes
    (a per-iteration rate jumps around with the few episodes that happen to end in it)."""
    recent.extend(out.stats.successes)
    m: dict[str, float] = {f"iter/{k}": v for k, v in out.stats.summary().items()}
    if recent:
        m["success_rate"] = float(sum(recent) / len(recent))
    if out.stats.returns:
        m["episode_return"] = m["iter/episode_return"]
    m.update(
        {
            "env_steps": float(total_steps),
            "env_steps_per_s": env_steps / max(seconds, 1e-9),
            "iteration_s": seconds,
            "weight_version": float(out.weight_version),
        }
    )
    m.update({f"train/{k}": v for k, v in out.train.items()})
    m.update({f"time/{k}": v for k, v in out.timings.items()})
    return m


class _Run:
    """Holds the topology and the weight store of one ``run`` call."""

    def __init__(self, cfg: EmbodiedConfig, cluster: Any) -> None:
        from learner.weights import WeightStore

        self.cfg = cfg
        self.placement = parse_placement(cfg.placement, cluster.num_slots, list(COMPONENTS))
        store_name = f"{cfg.name}-weights-{uuid.uuid4().hex[:8]}"
        local = getattr(cluster, "in_process", False)
        self.store = WeightStore.in_process(store_name) if local else WeightStore.create(store_name)
        name = topology_name(cfg, self.placement)
        log.info(
            "placement %s -> %s topology%s",
            self.placement.describe(),
            name,
            " (in-process)" if local else "",
        )
        try:
            self.topo = EMBODIED.get(name)(
                cfg, cluster, self.placement, self.store if local else store_name
            )
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
        if self.cfg.train.init_from and not self.cfg.train.resume:
            self.trainers.call("init_from", self.cfg.train.init_from).wait()
            log.info("model weights from %s (train.init_from)", self.cfg.train.init_from)
        if self.cfg.train.resume:
            meta = self.trainers.call("load", self.cfg.train.resume).wait()[0]
            start = int(meta["iteration"])
            log.info(
                "resumed from %s at iteration %d (weight version %d)",
                self.cfg.train.resume,
                start,
                meta["weight_version"],
            )
        # every rank: a sharded (fsdp) strategy gathers the full weights on all ranks; rank 0
        # publishes them
        version = self.trainers.call("publish").wait()[0]
        return start, version

    def save(self, iteration: int, metrics: dict[str, float]) -> Path:
        path = checkpoint_dir(self.cfg.train.out_dir, iteration)
        # every rank: a sharded (fsdp) strategy writes each rank's shards; ddp writes on rank 0
        self.trainers.call("save", str(path), iteration, metrics).wait()
        return path


def in_process(cfg: EmbodiedConfig, num_slots: int) -> bool:
    """Whether ``rlinf train`` may run this config without Ray (one fused local process)."""
    return runs_in_process(cfg, num_slots)


def _open_logger(cfg: EmbodiedConfig, start: int) -> Any:
    """Metrics logger; a resumed run continues the ``metrics.json`` history it resumed from."""
    from learner.metrics import MetricsLogger

    logger = MetricsLogger(
        cfg.train.out_dir,
        cfg.train.iterations,
        start,
        cfg.train.tensorboard,
        cfg.train.progress,
        desc=cfg.name,
        time_budget_s=cfg.train.time_budget_s,
    )
    if cfg.train.resume:
        logger.history = prior_history(cfg.train.out_dir, start)
    return logger


def _train_loop(
    cfg: EmbodiedConfig, r: _Run, logger: Any, start: int, budget: Budget, version: int
) -> tuple[int, int, dict[str, float]]:
    """Iterations until ``train.iterations`` or the budget; returns (last iteration, last saved,
    metrics)."""
    steps = steps_per_iteration(cfg, r.topo.env_spec.max_episode_steps)
    env_steps = steps * cfg.env.num_envs * cfg.model.chunk
    metrics: dict[str, float] = {"weight_version": float(version)}
    last_saved = start if (checkpoint_dir(cfg.train.out_dir, start) / "meta.json").exists() else -1
    recent: deque[bool] = deque(maxlen=100)
    wall0 = logger.history[-1].get("time/wall_s", 0.0) if logger.history else 0.0
    last = start
    for it in range(start, cfg.train.iterations):
        if budget.training_over():
            log.info(
                "train.time_budget_s=%s: stopping after %d iterations (%.0f s left for the final "
                "eval)",
                cfg.train.time_budget_s,
                it,
                budget.left(),
            )
            break
        t0 = time.perf_counter()
        out = r.topo.iterate(it, needs_reset(cfg, it, start), steps)
        metrics = iteration_metrics(
            out, env_steps, env_steps * (it + 1), time.perf_counter() - t0, recent
        )
        metrics["time/wall_s"] = wall0 + budget.elapsed()
        if it == start and cfg.train.final_eval:
            _reserve_eval(cfg, budget, out.timings, steps, r)
        logger.log(it, metrics)
        if logger.bar is not None and budget.seconds is not None:
            logger.bar.total = budget.iterations_that_fit(
                it + 1, budget.elapsed() / (it + 1 - start), planned=cfg.train.iterations
            )
        if cfg.train.checkpoint_every and (it + 1) % cfg.train.checkpoint_every == 0:
            r.save(it + 1, metrics)
            last_saved = it + 1
        last = it + 1
    return last, last_saved, metrics


def _reserve_eval(
    cfg: EmbodiedConfig, budget: Budget, timings: dict[str, float], steps: int, r: _Run
) -> None:
    """Keep the final eval's estimated time out of the training part of the budget."""
    if budget.seconds is None:
        return
    rollout_s = timings.get(
        "rollout_s", timings.get("env_busy_s", 0.0) + timings.get("infer_busy_s", 0.0)
    )
    per_process = cfg.env.num_envs // r.placement["env"].num_processes
    budget.reserve_eval(
        rollout_s / steps,
        per_process,
        cfg.eval.num_envs,
        cfg.eval.episodes,
        len(cfg.eval.ood_splits),
        math.ceil(r.topo.env_spec.max_episode_steps / cfg.model.chunk),
    )
    log.info(
        "train.time_budget_s=%s: %.0f s kept for the final eval (estimated)",
        budget.seconds,
        budget.eval_reserve_s,
    )


def run(cfg: EmbodiedConfig, cluster: Any) -> dict[str, Any]:
    """Train per ``cfg`` on ``cluster``; returns the final metrics (incl. held-out eval)."""
    budget = Budget.start(cfg.train.time_budget_s)
    r = _Run(cfg, cluster)
    logger = None
    try:
        start, version = r.prepare()
        logger = _open_logger(cfg, start)
        last, last_saved, metrics = _train_loop(cfg, r, logger, start, budget, version)
        final_path = checkpoint_dir(cfg.train.out_dir, last)
        if last_saved != last:
            final_path = r.save(last, metrics)
        final = {
            **logger.last,
            "iterations": last,
            "checkpoint": str(final_path),
            "placement_mode": r.placement.mode,
            "topology": topology_name(cfg, r.placement),
            "in_process": bool(getattr(cluster, "in_process", False)),
            "out_dir": cfg.train.out_dir,
        }
        if cfg.train.final_eval:
            final["eval"] = final_eval(cfg, final_path, budget.deadline)
        final["elapsed_s"] = budget.elapsed()
        return write_run(
            cfg.train.out_dir,
            "embodied",
            final,
            logger.history,
            title=cfg.name,
            tensorboard=cfg.train.tensorboard,
            logged_live=True,
        )
    finally:
        if logger is not None:
            logger.close()
        r.topo.shutdown()
        r.store.close()


RUNNERS.add("embodied", RunnerSpec(config_cls=EmbodiedConfig, run=run, in_process=in_process))
__all__ = ["run", "EmbodiedConfig", "in_process"]
