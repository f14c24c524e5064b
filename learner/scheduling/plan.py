"""Rank candidates with the cost model, and measure them: what ``rlinf schedule`` and
``placement: auto`` call.

``rank(cfg, num_slots)`` -> predictions, best first (by the predicted time of the config's whole
run: start-up + iterations x iteration time). ``measure(cfg, candidate, ...)`` runs the candidate
for a few iterations on the real runner and returns the median iteration time after warm-up.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from learner.scheduling.candidates import (
    Candidate,
    embodied_candidates,
    reasoning_candidates,
    with_candidate,
)
from learner.scheduling.cost import Prediction, predict_embodied
from learner.scheduling.curves import reference_s
from learner.sections import RunConfig

log = logging.getLogger(__name__)


def physical_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def runner_kind(cfg: RunConfig) -> str:
    """The runner a config is for; an unnamed one is planned as the embodied runner."""
    return cfg.runner or "embodied"


def run_length(cfg: RunConfig) -> int:
    """Iterations (embodied), steps (reasoning) or metrics rows (off-policy) of the configured
    run."""
    from learner.offpolicy.config import OffPolicyConfig
    from learner.runners.config import EmbodiedConfig
    from learner.runners.reasoning_config import ReasoningConfig

    if isinstance(cfg, OffPolicyConfig):
        return max(1, cfg.train.env_steps // max(cfg.train.log_every, 1))
    if isinstance(cfg, ReasoningConfig):
        return cfg.train.steps
    if isinstance(cfg, EmbodiedConfig):
        return cfg.train.iterations
    raise TypeError(
        f"placement planning covers the embodied, reasoning and offpolicy runners, "
        f"not {type(cfg).__name__} (runner {cfg.runner!r})"
    )


def profile_of(cfg: Any, refresh: bool = False) -> Any:
    """The workload's (cached) profile, whichever runner it is."""
    kind = runner_kind(cfg)
    if kind == "offpolicy":
        from learner.scheduling.offpolicy import profile_offpolicy

        return profile_offpolicy(cfg, refresh=refresh)
    if kind == "reasoning":
        from learner.scheduling.llm import profile_reasoning

        return profile_reasoning(cfg, refresh=refresh)
    from learner.scheduling.profile import profile_embodied

    return profile_embodied(cfg, refresh=refresh)


def predict_all(cfg: Any, prof: Any, comm: Any, num_slots: int, cores: int) -> list[Prediction]:
    """Every candidate's prediction from ``prof`` and ``comm``, in candidate order (the first one
    is the in-process candidate a calibration runs)."""
    kind = runner_kind(cfg)
    if kind == "offpolicy":
        from learner.scheduling.offpolicy import candidates, predict_offpolicy

        return [
            predict_offpolicy(prof, comm, c, num_slots, cores, cfg)
            for c in candidates(num_slots, cfg.env.num_envs)
        ]
    if kind == "reasoning":
        from learner.scheduling.llm import predict_reasoning

        return [
            predict_reasoning(prof, comm, c, num_slots, cores)
            for c in reasoning_candidates(num_slots)
        ]
    updates = cfg.actor.epochs * cfg.actor.minibatches
    cands = embodied_candidates(num_slots, cfg.env.num_envs, group=cfg.algorithm.env_group_size)
    cands = [
        c for c in cands if c.fuse or not cfg.rollout.fuse_collocated or "collocated" in c.label
    ]
    return [predict_embodied(prof, comm, c, num_slots, cores, updates) for c in cands]


def rank(
    cfg: Any,
    num_slots: int,
    *,
    refresh: bool = False,
    cores: int | None = None,
    comm: Any = None,
    load_factor: bool = True,
    calibration: Any = None,
) -> list[Prediction]:
    """Every candidate's prediction, best (shortest whole run) first.

    With a ``calibration`` (:mod:`learner.scheduling.calibrate`: this workload's speed now and the
    channel latencies under the machine's current load), the profile's compute times are scaled
    by its factor and its comm profile is used. Without one, and with ``load_factor``, the
    prediction is scaled by the reference kernel now vs at profiling time (:func:`reference_s`).
    """
    cores = cores or physical_cores()
    prof = profile_of(cfg, refresh)
    if calibration is not None:
        preds = predict_all(cfg, calibration.apply(prof), calibration.comm, num_slots, cores)
        for p in preds:
            p.breakdown["calibration_factor"] = calibration.factor
    else:
        preds = predict_all(cfg, prof, comm or _comm(refresh), num_slots, cores)
        if load_factor and prof.ref_s > 0:
            scale(preds, reference_s() / prof.ref_s)
    n = run_length(cfg)
    return sorted(preds, key=lambda p: p.total_s(n))


def scale(preds: list[Prediction], factor: float) -> None:
    """Scale predictions by the machine's current speed relative to profiling time."""
    for p in preds:
        p.iteration_s *= factor
        p.breakdown = {k: v * factor for k, v in p.breakdown.items()}
        p.breakdown["load_factor"] = factor


def _comm(refresh: bool) -> Any:
    import ray

    from learner.scheduling.comm import CommProfile, profile_comm
    from learner.scheduling.curves import load_cached, workload_key

    if ray.is_initialized() or refresh:
        return profile_comm(refresh=refresh)
    cached = load_cached(workload_key("comm", {"v": 1}))
    return CommProfile.from_dict(cached) if cached else profile_comm()


LAST_PHASES: dict[str, float] = {}
"""Median ``time/*`` phases of the last embodied :func:`measure` (empty for the other runners)."""


def measure(
    cfg: Any, cand: Candidate, cluster: Any, *, iterations: int = 4, warmup: int = 2
) -> float:
    """Median iteration (embodied) / step (reasoning) / metrics-row (off-policy) seconds of
    ``cand``, after ``warmup``."""
    LAST_PHASES.clear()
    if runner_kind(cfg) == "offpolicy":
        from learner.scheduling.offpolicy import measure_offpolicy

        return measure_offpolicy(cfg, cand, cluster, iterations=iterations, warmup=1)
    if runner_kind(cfg) == "reasoning":
        from learner.scheduling.llm import measure_reasoning

        return measure_reasoning(cfg, cand, cluster, iterations=iterations, warmup=warmup)
    from learner.cluster import InProcess
    from learner.runners import get_runner
    from learner.runners.topology import runs_in_process

    run_cfg = with_candidate(cfg, cand)
    with tempfile.TemporaryDirectory() as tmp:
        run_cfg.train.iterations, run_cfg.train.out_dir = (
            warmup + iterations,
            str(Path(tmp) / "run"),
        )
        run_cfg.train.final_eval = run_cfg.train.tensorboard = run_cfg.train.progress = False
        run_cfg.train.checkpoint_every, run_cfg.train.time_budget_s, run_cfg.train.resume = (
            0,
            None,
            None,
        )
        where = (
            InProcess(cluster.num_slots) if runs_in_process(run_cfg, cluster.num_slots) else cluster
        )
        get_runner("embodied").run(run_cfg, where)
        hist = json.loads((Path(run_cfg.train.out_dir) / "metrics.json").read_text())["history"][
            warmup:
        ]
    LAST_PHASES.clear()  # what the benchmark reports beside the iteration time
    LAST_PHASES.update(
        {k: statistics.median(h[k] for h in hist) for k in hist[0] if k.startswith("time/")}
    )
    return statistics.median(h["iteration_s"] for h in hist)


def _profile_ref(cfg: Any) -> float:
    """The reference-kernel time stored with the workload's (cached) profile."""
    return profile_of(cfg).ref_s
