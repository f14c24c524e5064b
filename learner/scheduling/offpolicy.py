"""Profile, candidates, cost model and measurement of the off-policy runner (``runner: offpolicy``).

The off-policy runner has no iteration in the on-policy sense: the learner logs a metrics row
every ``train.log_every`` env transitions, so its "iteration" here is the time of one such row
(``log_every`` transitions and the ``utd_ratio x log_every`` updates they owe), after warm-up.

Profile (in this process, one torch thread, the runner's own classes; a few seconds):
``step_s``: one vector step (policy act + env step) as a :class:`Curve` over envs, at ``B`` and
``B/2`` (what one of two env workers steps); ``update_s``: one update on ``batch_size``
transitions (the replay filled with real transitions first); ``ingest_s``: adding one
transition to the replay; ``publish_s``: a state-dict copy for the weight store.

Cost of one row (``R = log_every`` transitions, ``U = utd_ratio x R`` updates):

- ``fused`` (env, learner, replay in one process): ``R/B x step(B) + R x ingest + U x update``;
- ``async`` (``E`` env workers elsewhere, finished episodes through a bounded channel, weights
  every ``publish_every`` updates): a producer/consumer pipeline whose throughput is set by its
  busiest *core*: each process has work per row (env worker ``R/B x step(B/E)``, learner ``U x
  update + R x ingest + U/publish_every x (publish + fetch)``), the work of processes pinned to
  the same core adds (times the core's calibrated slowdown), and the row takes the largest
  core's sum (the bounded channel keeps the faster side waiting, so nothing is gained beyond
  it), plus the trip of the episodes.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learner.scheduling.candidates import Candidate
from learner.scheduling.comm import CommProfile
from learner.scheduling.cost import Prediction
from learner.scheduling.curves import Curve, load_cached, reference_s, store_cached, workload_key

log = logging.getLogger(__name__)
PROFILE_VERSION = 1
COMPONENTS = ("env", "learner", "replay")


@dataclass
class OffPolicyProfile:
    num_envs: int
    step_s: Curve = field(default_factory=Curve)
    update_s: float = 0.0
    ingest_s: float = 0.0  # per transition
    publish_s: float = 0.0
    weight_bytes: int = 0
    transition_bytes: int = 0
    build_s: float = 0.0
    seconds: float = 0.0
    ref_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "step_s": self.step_s.to_dict()}

    def scaled(self, factor: float) -> OffPolicyProfile:
        """Compute times x ``factor``: a calibration."""
        return dataclasses.replace(
            self,
            step_s=self.step_s.scaled(factor),
            update_s=self.update_s * factor,
            ingest_s=self.ingest_s * factor,
            publish_s=self.publish_s * factor,
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OffPolicyProfile:
        return cls(**{**d, "step_s": Curve.from_dict(d["step_s"])})


def candidates(num_slots: int, num_envs: int) -> list[Candidate]:
    """Fused on one slot; with 2+ slots an async env worker on its own slot, and two env workers
    (one beside the learner) when the envs split."""
    out = [Candidate("fused", {"env,learner,replay": "0"}, fuse=True)]
    if num_slots > 1:
        out.append(Candidate("async", {"env": "1", "learner,replay": "0"}, fuse=False))
        if num_envs >= 2:
            out.append(Candidate("async x2", {"env": "0-1", "learner,replay": "0"}, fuse=False))
    return out


def _workload(cfg: Any) -> dict[str, Any]:
    from rlinf_contracts.config import to_dict

    raw = to_dict(cfg)
    return {k: raw[k] for k in ("env", "model", "algorithm", "replay", "seed")} | {
        "v": PROFILE_VERSION
    }


def _time(fn: Any, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _profile_steps(
    cfg: Any, prof: OffPolicyProfile, core: Any, policy: Any, b: int, n: int
) -> None:
    from learner.offpolicy.collect import Collector
    from learner.rollout.envs import build_env

    env = build_env(cfg.env.name, b, **cfg.env.factory_kwargs())
    try:
        collector = Collector(env, policy, cfg.env.name, seed=cfg.seed)
        for _ in range(2):
            collector.step()
        prof.step_s.points[b] = _time(collector.step, n)
        if b == prof.num_envs:  # fill the replay with real transitions for the update timing
            need = max(cfg.algorithm.batch_size * 4, cfg.train.learning_starts) // b + 1
            steps = [collector.step(random=True) for _ in range(need)]
            t0 = time.perf_counter()
            for s in steps:
                core.ingest_step(s)
            prof.ingest_s = (time.perf_counter() - t0) / (len(steps) * b)
            prof.transition_bytes = (
                sum(getattr(v, "nbytes", 0) for v in steps[0].obs.values()) * 2 // b
            )
    finally:
        env.close()


def profile_offpolicy(cfg: Any, *, refresh: bool = False, updates: int = 30) -> OffPolicyProfile:
    """The workload's profile, from the cache unless ``refresh``."""
    import torch

    from learner.offpolicy.learner import OffPolicyLearner
    from learner.rollout.envs import build_env

    key = workload_key("offpolicy", _workload(cfg))
    cached = None if refresh else load_cached(key)
    if cached is not None:
        return OffPolicyProfile.from_dict(cached)
    cfg = copy.deepcopy(cfg)
    cfg.train.demos = None  # the demos' load is start-up, not per row
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    t_start = time.perf_counter()
    try:
        prof = OffPolicyProfile(cfg.env.num_envs)
        ref0 = reference_s()
        env = build_env(cfg.env.name, 1, **cfg.env.factory_kwargs())
        spec = env.spec
        env.close()
        t0 = time.perf_counter()
        core = OffPolicyLearner(cfg, spec)
        prof.build_s = time.perf_counter() - t0
        for b in sorted({cfg.env.num_envs, max(cfg.env.num_envs // 2, 1)}, reverse=True):
            _profile_steps(cfg, prof, core, core.policy, b, 8)
        core.owed = 3
        core.train_owed()  # warm-up: optimizer state, allocator
        core.owed = updates
        t0 = time.perf_counter()
        core.train_owed()
        prof.update_s = (time.perf_counter() - t0) / updates
        t0 = time.perf_counter()
        state = {k: v.detach().cpu().clone() for k, v in core.policy.state_dict().items()}
        prof.publish_s = time.perf_counter() - t0
        prof.weight_bytes = sum(v.numel() * v.element_size() for v in state.values())
        prof.ref_s = (ref0 + reference_s()) / 2
    finally:
        torch.set_num_threads(threads)
    prof.seconds = time.perf_counter() - t_start
    store_cached(key, prof.to_dict())
    log.info("profiled off-policy %s in %.1f s", cfg.env.name, prof.seconds)
    return prof


def predict_offpolicy(
    prof: OffPolicyProfile, comm: CommProfile, cand: Candidate, num_slots: int, cores: int, cfg: Any
) -> Prediction:
    """Predicted seconds per metrics row of ``cand`` (see the module docstring)."""
    from learner.placement import parse_placement

    placement = parse_placement(cand.placement, num_slots, list(COMPONENTS))
    row, b = cfg.train.log_every, prof.num_envs
    updates = cfg.algorithm.utd_ratio * row
    learn = updates * prof.update_s + row * prof.ingest_s
    env_procs, learner = placement["env"].process_slots, placement["learner"].process_slots
    if env_procs == learner:
        env = row / b * prof.step_s(b)
        return Prediction(
            cand, env + learn, prof.build_s, {"env": env, "learner": learn}, placement.mode
        )
    e = len(env_procs)
    env_each = row / b * prof.step_s(b / e)
    publishes = updates / max(cfg.train.publish_every, 1)
    sync = publishes * (prof.publish_s + comm.weight_fetch(prof.weight_bytes / 1024))
    work: dict[int, float] = {}
    for slots in env_procs:
        for s in slots:
            work[s % cores] = work.get(s % cores, 0.0) + env_each / len(slots)
    for s in learner[0]:
        work[s % cores] = work.get(s % cores, 0.0) + (learn + sync) / len(learner[0])
    work = {c: w * comm.core(c) for c, w in work.items()}  # calibrated core slowdowns
    trip = comm.hop(False, prof.transition_bytes * row / max(e, 1))
    t = max(work.values()) + trip + comm.call_s
    return Prediction(
        cand,
        t,
        comm.ray_init_s + comm.spawn_s + prof.build_s,
        {
            "env_per_worker": env_each,
            "learner": learn,
            "weight_sync": sync,
            "trip": trip,
            "busiest_core": max(work.values()),
        },
        placement.mode,
    )


def measure_offpolicy(
    cfg: Any, cand: Candidate, cluster: Any, *, iterations: int = 4, warmup: int = 1
) -> float:
    """Seconds per ``log_every`` transitions of ``cand`` on the real runner, after warm-up: the
    slope of wall time over env steps across the measured rows (async rows arrive per whole
    episode)."""
    from learner.cluster import InProcess
    from learner.offpolicy.topology import runs_in_process
    from learner.runners import get_runner
    from learner.scheduling.candidates import with_candidate

    c = with_candidate(cfg, cand)
    with tempfile.TemporaryDirectory() as tmp:
        t = c.train
        start = max(t.warmup_steps, t.learning_starts)
        t.env_steps = start + (warmup + iterations + 1) * t.log_every
        t.out_dir, t.final_eval, t.tensorboard, t.progress = (
            str(Path(tmp) / "run"),
            False,
            False,
            False,
        )
        t.checkpoint_every, t.time_budget_s, t.resume, t.store_online = 0, None, None, False
        where = InProcess(cluster.num_slots) if runs_in_process(c, cluster.num_slots) else cluster
        get_runner("offpolicy").run(c, where)
        hist = json.loads((Path(t.out_dir) / "metrics.json").read_text())["history"]
    rows = [h for h in hist if h["env_steps"] > start + t.log_every * warmup]
    if len(rows) < 2:
        raise RuntimeError(
            f"off-policy measurement of {cand.label}: {len(rows)} rows after warm-up"
        )
    first, last = rows[0], rows[-1]
    return (
        (last["time/wall_s"] - first["time/wall_s"])
        / (last["env_steps"] - first["env_steps"])
        * t.log_every
    )
