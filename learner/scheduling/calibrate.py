"""Calibration: how fast this workload and the channels run on the machine *now*.

Why: the profile is taken in seconds, in this process, with nothing else of ours running; a run
is measured minutes later on a machine shared with other jobs. On this project's 2-core machine
(load average 3-12 from other agents) two effects dominated the cost model's error:

- **compute runs slower in the real runner than in the profile**, by a factor that changes with
  the machine's load (a sustained reference kernel varied 4x within seconds, so it cannot
  predict it) and includes the runner's own per-iteration work the profile leaves out (logging,
  returns, trajectory assembly);
- **a channel hop costs the wake-up latency of a loaded scheduler**: 2-3 ms measured on a quieter
  machine, 4-23 ms at load 12, and channel placements pay one round trip per step and stage.

A third showed once the first two were calibrated: **the cores are not equally loaded**. Workers
are pinned to their slot's core and every job's slot 0 is core 0, so on a shared machine core 0
can run single-threaded work several times slower than core 1.

So a calibration measures all three at the time of use (~20-60 s): the machine's comm profile
(:func:`learner.scheduling.comm.profile_comm` on the run's own cluster), the per-core slowdown
(:func:`core_factors`, the reference kernel pinned to each core in turn) and the workload's
*in-process candidate* (fused on one slot / the inline GRPO driver / fused off-policy) run for a
few iterations on the real runner; ``factor = measured / predicted`` of that candidate, whose
prediction is pure compute, and every candidate's compute times are multiplied by it.

What this does not capture: contention between *our own* processes beyond the time-sharing
factor of the cost model, and load that changes between calibration and run. The in-process
candidate's own error after calibration shows the run-to-run noise, not a model error.
The calibration is cached per workload and slot count; ``placement: auto`` uses it when present.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from learner.scheduling.comm import CommProfile
from learner.scheduling.curves import load_cached, store_cached, workload_key

log = logging.getLogger(__name__)
RUNS = 3
"""Each reference run is made this many times and the *median* kept. Why several: on a shared
machine a short run is sometimes disturbed several-fold (a 2-iteration channel run once took
5.7 s instead of 0.3 s), and one such run would mis-scale every prediction. Why the median and
not the fastest: the benchmark measures medians, and the fastest of two short runs of a
multi-process candidate read 8-10% below its median -- every channel prediction inherited that
bias (split d1, its own reference, was predicted 0.257 s against 0.275-0.288 s measured)."""
CAL_ITERATIONS = 3  # timed iterations per reference run (after one warm-up)


def _median_run(run: Any) -> Any:
    """The median (by seconds) of :data:`RUNS` results of ``run()``; results are ``seconds`` or
    ``(seconds, extra)``."""
    results = sorted(
        (run() for _ in range(RUNS)), key=lambda r: r[0] if isinstance(r, tuple) else r
    )
    return results[len(results) // 2]


@dataclass
class Calibration:
    factor: float  # measured / predicted of the in-process candidate
    comm: CommProfile  # hops, store fetch, calls under the load of the calibration
    reference: str = ""  # the in-process candidate's label
    predicted_s: float = 0.0
    measured_s: float = 0.0
    load: float = 0.0  # 1-min load average while calibrating
    seconds: float = 0.0
    loop: dict[str, float] = field(
        default_factory=dict
    )  # the channel loop's reference run (embodied)

    def apply(self, prof: Any) -> Any:
        """``prof`` with this calibration's compute factor and the channel workers' per-step
        work."""
        out = prof.scaled(self.factor)
        if self.loop and hasattr(out, "loop_env_x"):
            out = dataclasses.replace(
                out, loop_env_x=self.loop["env_x"], loop_infer_x=self.loop["infer_x"]
            )
        if self.loop and hasattr(out, "times") and "workers_s" in self.loop:
            out.times["workers"] = self.loop["workers_s"]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "comm": self.comm.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        return cls(**{**d, "comm": CommProfile.from_dict(d["comm"])})


def core_factors(cores: int, rounds: int = 7, repeats: int = 8) -> dict[str, float]:
    """Slowdown of single-threaded compute on each core relative to core 0, now: this process
    pinned to each core in turn runs :func:`reference_s`, interleaved ``rounds`` times; median per
    core. Why: workers are pinned to their slot's core, and on a shared machine other jobs'
    pinned workers (slot 0 is everyone's first core) load the cores unevenly."""
    import statistics

    from learner.scheduling.curves import reference_s

    if cores < 2 or not hasattr(os, "sched_getaffinity"):
        return {}
    saved = os.sched_getaffinity(0)
    times: dict[int, list[float]] = {c: [] for c in range(cores)}
    try:
        for r in range(rounds):
            for c in range(cores) if r % 2 == 0 else reversed(range(cores)):
                os.sched_setaffinity(0, {c})
                times[c].append(reference_s(repeats))
    finally:
        os.sched_setaffinity(0, saved)
    base = statistics.median(times[0])
    return {str(c): statistics.median(t) / base for c, t in times.items()}


def _key(cfg: Any, num_slots: int) -> str:
    from rlinf_contracts.config import to_dict

    raw = to_dict(cfg)
    raw.pop("placement", None)
    raw.get("train", {}).pop("out_dir", None)
    return workload_key("calibration", {"cfg": raw, "slots": num_slots, "v": 2})


def cached_calibration(cfg: Any, num_slots: int) -> Calibration | None:
    d = load_cached(_key(cfg, num_slots))
    return Calibration.from_dict(d) if d else None


def calibrate(
    cfg: Any,
    num_slots: int,
    cluster: Any,
    *,
    iterations: int = CAL_ITERATIONS,
    cores: int | None = None,
) -> Calibration:
    """Measure the comm profile on ``cluster`` and the in-process candidate's speed; cache both."""
    from learner.scheduling.comm import profile_comm
    from learner.scheduling.plan import measure, physical_cores, predict_all, profile_of

    t0 = time.perf_counter()
    cores = cores or physical_cores()
    comm = profile_comm(cluster, refresh=True, n=60)
    comm.core_factor = core_factors(cores)
    prof = profile_of(cfg)
    ref = predict_all(cfg, prof, comm, num_slots, cores)[0]
    measured = _median_run(
        lambda: measure(cfg, ref.candidate, cluster, iterations=iterations, warmup=1)
    )
    cal = Calibration(
        measured / ref.iteration_s,
        comm,
        ref.candidate.label,
        ref.iteration_s,
        measured,
        os.getloadavg()[0],
    )
    if hasattr(prof, "loop_env_x"):  # the embodied runner: its channel loop as well
        cal.loop = calibrate_loop(cfg, cal.apply(prof), comm, num_slots, cores, cluster, iterations)
    elif hasattr(prof, "times"):  # GRPO: the worker driver's streaming work
        cal.loop = calibrate_workers(
            cfg, cal.apply(prof), comm, num_slots, cores, cluster, iterations
        )
    cal.seconds = time.perf_counter() - t0
    store_cached(_key(cfg, num_slots), cal.to_dict())
    log.info(
        "calibration: %s predicted %.3f s, measured %.3f s -> compute x %.2f (load %.1f, %.0f s)",
        cal.reference,
        cal.predicted_s,
        cal.measured_s,
        cal.factor,
        cal.load,
        cal.seconds,
    )
    return cal


def calibrate_loop(
    cfg: Any,
    prof: Any,
    comm: CommProfile,
    num_slots: int,
    cores: int,
    cluster: Any,
    iterations: int = CAL_ITERATIONS,
) -> dict[str, float]:
    """Run the simplest channel candidate (one env and one rollout process, depth 1) and read off
    what the profile cannot see of the runner's env <-> rollout loop; sets ``comm.loop_hop_s``.

    - ``env_x`` / ``infer_x``: the workers' measured busy time per step (``time/env_busy_s``,
      ``time/infer_busy_s``) over the profile's bare env step and policy query: the rollout worker
      also seeds, builds the trajectory and bootstraps values (2-3x the bare query here);
    - ``loop_hop_s``: half of what a step takes beyond that compute (a step is one round trip
      env -> rollout -> env when one stream is in flight): the hop as the runner's messages (two
      channel actors, real payloads) pay it, larger than the ping-pong's; it also caps the
      ping-pong's CPU per message pair (``occupancy_s``), which one stream's step contains.
    Returns the figures (empty when no such candidate exists, e.g. on one slot)."""
    from learner.placement import parse_placement
    from learner.scheduling import plan
    from learner.scheduling.cost import COMPONENTS, predict_embodied

    updates = cfg.actor.epochs * cfg.actor.minibatches
    for pred in plan.predict_all(cfg, prof, comm, num_slots, cores):
        pl = parse_placement(pred.candidate.placement, num_slots, list(COMPONENTS))
        if (
            "step" in pred.breakdown
            and pred.candidate.stages == 1
            and pl["env"].num_processes == pl["rollout"].num_processes == 1
        ):
            break
    else:
        return {}
    measured, phases = _median_run(
        lambda: (
            plan.measure(cfg, pred.candidate, cluster, iterations=iterations, warmup=1),
            dict(plan.LAST_PHASES),
        )
    )
    steps, n = prof.steps, prof.num_envs
    e, i = prof.env_step(n), prof.infer(n)
    env_x = phases.get("time/env_busy_s", steps * e) / (steps * e) if e > 0 else 1.0
    infer_x = phases.get("time/infer_busy_s", (steps + 1) * i) / ((steps + 1) * i) if i > 0 else 1.0
    rest = pred.breakdown["train"] + pred.breakdown["weight_sync"] + pred.breakdown["calls"]
    rest = rest - pred.breakdown["train"] + phases.get("time/train_s", pred.breakdown["train"])
    tail = (
        pred.breakdown["rollout"] - steps * pred.breakdown["step"] + i * (infer_x - 1)
    )  # last query + trip
    step = max(measured - rest - tail, 0.0) / steps
    comm.loop_hop_s = max((step - e * env_x - i * infer_x) / 2, comm.hop(True, 0))
    # one stream's step bounds the CPU per message pair too (the ping-pong's occupancy is a
    # difference of two timings and read 17 ms once under load, against a 7 ms runner hop)
    comm.occupancy_s = {k: min(v, comm.loop_hop_s) for k, v in comm.occupancy_s.items()}
    check = predict_embodied(
        dataclasses.replace(prof, loop_env_x=env_x, loop_infer_x=infer_x),
        comm,
        pred.candidate,
        num_slots,
        cores,
        updates,
    )
    log.info(
        "loop calibration: %s measured %.3f s (predicted now %.3f s): env x %.2f, infer x %.2f, "
        "hop %.1f ms",
        pred.candidate.label,
        measured,
        check.iteration_s,
        env_x,
        infer_x,
        comm.loop_hop_s * 1e3,
    )
    return {
        "env_x": env_x,
        "infer_x": infer_x,
        "hop_s": comm.loop_hop_s,
        "reference": pred.candidate.label,
        "measured_s": measured,
        "predicted_s": check.iteration_s,
    }


def calibrate_workers(
    cfg: Any,
    prof: Any,
    comm: CommProfile,
    num_slots: int,
    cores: int,
    cluster: Any,
    iterations: int = CAL_ITERATIONS,
) -> dict[str, float]:
    """GRPO: run the ``collocated`` worker candidate (every group on one slot, so its phases are
    serial) and keep ``workers_s`` = measured - predicted: the per-step work of the worker driver
    that the inline profile does not see (:mod:`learner.scheduling.llm`)."""
    from learner.scheduling import plan

    pred = next(
        (
            p
            for p in plan.predict_all(cfg, prof, comm, num_slots, cores)
            if p.candidate.label == "collocated"
        ),
        None,
    )
    if pred is None:
        return {}
    measured = _median_run(
        lambda: plan.measure(cfg, pred.candidate, cluster, iterations=max(iterations, 3), warmup=1)
    )
    workers = max(measured - pred.iteration_s, 0.0)
    log.info(
        "worker calibration: collocated measured %.3f s, predicted %.3f s -> %.3f s per step",
        measured,
        pred.iteration_s,
        workers,
    )
    return {
        "workers_s": workers,
        "reference": "collocated",
        "measured_s": measured,
        "predicted_s": pred.iteration_s + workers,
    }
