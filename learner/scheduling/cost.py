"""The cost model of the embodied on-policy runner: one iteration's pipelined critical path.

Inputs: a workload profile (:mod:`learner.scheduling.profile`), the machine's comm profile
(:mod:`learner.scheduling.comm`), a candidate (placement + depth), and the cores the slots map
to (a CPU slot ``s`` runs on core ``s % cores``, as the worker pinning does). Notation: ``B``
envs, ``T`` steps, ``S`` pipeline stages, ``E`` / ``R`` / ``A`` env / rollout / actor processes,
``m = B / (E S)`` envs per micro-batch, ``e = env_step(m)``, ``i = infer(m)``.

*Fused* (one process per rank does everything; ``k`` ranks):
``rollout = T S (env_step(m) + infer(m)) + S infer(m)``, ``train = train(B/k)``, both times
the time-sharing factor ``ceil(k / cores)``; ``k > 1`` adds one gradient all-reduce per
update (assumed gloo latency and bandwidth: :data:`GLOO_LATENCY_S`, :data:`GLOO_BYTES_PER_S`).

*Channels*: env and rollout form a two-resource cyclic pipeline. Per step each env process is
busy ``S (e + o)``, each rollout process ``(E S / R)(i + o)`` (``o`` = CPU per message pair), and
one micro-batch's round trip is ``e + i + 2h`` (``h`` = hop latency of an observation). With env
and rollout on the same core their busy times add. ``step = max(busy..., round trip)``;
``rollout = T step`` + the trajectory's trip to the actor; ``train = train(B / A)`` (x time
sharing, + all-reduce); weight sync = publish + one store fetch of the weights; three group calls.

Start-up (paid once, reported apart and added to a run's total): env and model construction,
plus Ray start and worker spawn unless the run is in-process. On GPUs a collocated placement
would add offload / onload of the weights per phase switch; on CPU slots that is zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from learner.scheduling.candidates import Candidate
from learner.scheduling.comm import CommProfile
from learner.scheduling.profile import EmbodiedProfile

COMPONENTS = ("env", "rollout", "actor")


@dataclass
class Prediction:
    candidate: Candidate
    iteration_s: float
    startup_s: float
    breakdown: dict[str, float] = field(default_factory=dict)
    mode: str = ""
    measured_s: float | None = None

    def total_s(self, iterations: int) -> float:
        return self.startup_s + iterations * self.iteration_s

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured, when measured."""
        if self.measured_s is None or self.measured_s <= 0:
            return None
        return (self.iteration_s - self.measured_s) / self.measured_s


def _cores(slots: list[int], cores: int) -> set[int]:
    return {s % cores for s in slots}


def _share(procs: list[list[int]], cores: int, comm: CommProfile | None = None) -> float:
    """Time-sharing factor of a group whose processes run at once: processes per core times that
    core's slowdown (:meth:`CommProfile.core`, 1 unless calibrated), on the worst core."""
    load: dict[int, float] = {}
    for slots in procs:
        for c in _cores(slots, cores):
            load[c] = load.get(c, 0.0) + 1.0 / len(slots)
    return max(max(1.0, n) * (comm.core(c) if comm else 1.0) for c, n in load.items())


GLOO_LATENCY_S = 5e-4
"""Assumed latency of one gloo all-reduce round on one machine (not profiled)."""
GLOO_BYTES_PER_S = 1e9
"""Assumed loopback all-reduce bandwidth (not profiled)."""


def _allreduce(
    prof: EmbodiedProfile, ranks: int, updates: int, comm: CommProfile | None = None
) -> float:
    """Ring all-reduce of the gradients once per update and two of statistics per train call:
    the measured two-rank all-reduce (``comm.allreduce_s``) x log2(k), else 2 log2(k) rounds of
    the assumed latency; + 2 x bytes over the assumed bandwidth."""
    if ranks <= 1:
        return 0.0
    measured = comm.allreduce_s if comm is not None else 0.0
    latency = measured * math.log2(ranks) if measured > 0 else 2 * math.log2(ranks) * GLOO_LATENCY_S
    return (updates + 2) * latency + updates * 2 * prof.weight_bytes / GLOO_BYTES_PER_S


def predict_fused(
    prof: EmbodiedProfile,
    comm: CommProfile,
    cand: Candidate,
    placement: Any,
    cores: int,
    updates: int,
) -> Prediction:
    k, s = placement["actor"].num_processes, cand.stages
    m = prof.num_envs / (k * s)
    share = _share(placement["actor"].process_slots, cores, comm)
    rollout = share * (prof.steps * s * (prof.env_step(m) + prof.infer(m)) + s * prof.infer(m))
    train = share * prof.train(prof.num_envs / k) + _allreduce(prof, k, updates, comm)
    local = k == 1
    sync = prof.publish_s + (0.0 if local else comm.weight_fetch(prof.weight_bytes / 1024))
    overhead = 0.0 if local else comm.call_s
    build = sum(prof.build_s.values())
    startup = build if local else comm.ray_init_s + comm.spawn_s + build
    return Prediction(
        cand,
        rollout + train + sync + overhead,
        startup,
        {"rollout": rollout, "train": train, "weight_sync": sync, "calls": overhead},
        placement.mode,
    )


def predict_channels(
    prof: EmbodiedProfile,
    comm: CommProfile,
    cand: Candidate,
    placement: Any,
    cores: int,
    updates: int,
) -> Prediction:
    pe, pr, pa = (placement[c] for c in COMPONENTS)
    e_n, r_n, a_n, s = pe.num_processes, pr.num_processes, pa.num_processes, cand.stages
    m = prof.num_envs / (e_n * s)
    e, i = prof.env_step(m) * prof.loop_env_x, prof.infer(m) * prof.loop_infer_x
    same = bool(_cores(pe.slots, cores) & _cores(pr.slots, cores))
    h, o = comm.hop(same, prof.obs_bytes_per_env * m), comm.occupancy(same)
    if comm.loop_hop_s > 0:  # calibrated on the runner's own loop (one stream in flight)
        h = comm.loop_hop_s
    env_busy = s * (e + o) * _share(pe.process_slots, cores, comm)
    roll_busy = (e_n * s / r_n) * (i + o) * _share(pr.process_slots, cores, comm)
    busy = env_busy + roll_busy if same else max(env_busy, roll_busy)
    slow_e = max(comm.core(c) for c in _cores(pe.slots, cores))
    slow_i = max(comm.core(c) for c in _cores(pr.slots, cores))
    queue = (e_n * s - 1) * max(
        o, comm.channel_cpu_s / 2
    )  # the other streams' messages ahead of this one in the channel actors
    # the whole machine: every stream's compute and message CPU, the channel actors' included (they
    # are not pinned and run wherever a core is free: the actor processes idle during the rollout)
    machine = e_n * s * (e + i + 2 * o + comm.channel_cpu_s) / cores
    step = max(busy, machine, e * slow_e + i * slow_i + 2 * h + queue)
    traj = comm.hop(False, prof.row_step_bytes * prof.num_envs * prof.steps / a_n)
    rollout = prof.steps * step + (e_n * s / r_n) * i * slow_i + traj
    train = _share(pa.process_slots, cores, comm) * prof.train(prof.num_envs / a_n) + _allreduce(
        prof, a_n, updates, comm
    )
    sync = prof.publish_s + comm.weight_fetch(prof.weight_bytes / 1024)
    calls = 3 * comm.call_s
    startup = comm.ray_init_s + comm.spawn_s + sum(prof.build_s.values())
    return Prediction(
        cand,
        rollout + train + sync + calls,
        startup,
        {
            "rollout": rollout,
            "step": step,
            "hop": h,
            "queue": queue,
            "machine": machine,
            "train": train,
            "weight_sync": sync,
            "calls": calls,
        },
        placement.mode,
    )


def predict_embodied(
    prof: EmbodiedProfile,
    comm: CommProfile,
    cand: Candidate,
    num_slots: int,
    cores: int,
    updates: int,
) -> Prediction:
    """Predicted steady-state iteration time (and start-up) of ``cand`` for this workload."""
    from learner.placement import parse_placement

    placement = parse_placement(cand.placement, num_slots, list(COMPONENTS))
    same = len({tuple(map(tuple, placement[c].process_slots)) for c in COMPONENTS}) == 1
    if same and cand.fuse:
        return predict_fused(prof, comm, cand, placement, cores, updates)
    return predict_channels(prof, comm, cand, placement, cores, updates)
