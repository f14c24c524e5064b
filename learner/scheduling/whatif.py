"""What-if: the cost model on clusters of 8 to 1,024 GPUs, from per-component scaling laws.

Nothing here is measured on GPUs: a workload is per-component costs on one GPU (stated in
:data:`WORKLOADS`, shaped after published RLinf / veRL setups) and these scaling laws:

- **env / inference / generation** scale out, but a GPU is only efficient with enough work:
  ``t(n) = t_sat / n / eff(B / n)``, ``eff(b) = b / (b + b_half)`` for a global batch of ``B``
  items (envs or sequences) and a per-GPU half-saturation batch ``b_half`` (GPU simulators want
  thousands of envs per GPU; decoding is memory-bound until the batch fills the GPU);
  generation also has a long tail: the slowest of ``n`` shards takes ``tail(n) = 1 +
  tail_cv * sqrt(2 ln n)`` times the mean (the expected maximum of ``n`` normal shard times);
- **training** is data parallel: ``t(n) = t1 / n + allreduce(n)``, ring all-reduce
  ``2 (n-1)/n * bytes / bw + 2 log2(n) * lat`` (``bw`` 100 GB/s NVLink inside 8-GPU nodes,
  25 GB/s between nodes);
- **weight sync** rollout <- actor: one broadcast ``bytes / bw + log2(n) * lat``;
- **collocated** switching: every iteration offloads and onloads the other phase's model and
  optimizer state over PCIe (25 GB/s per GPU) -- RLinf's and veRL's "context switch" cost.

Modes for ``n`` GPUs: ``collocated`` (every phase on all ``n``, in sequence, + switching);
``disaggregated`` (rollout on ``r``, actor on ``n - r``, the best ``r``; with fine-grained
pipelining over ``S`` micro-batches the phases overlap except one micro-batch of fill and
drain: ``max(R, A) + min(R, A) / S``); ``hybrid`` (env and inference pipelined on
disjoint GPUs, training collocated over all: ``max(E, I) + min(E, I) / S + T(n)``);
``+ realloc`` (disaggregated, and once generation's long tail starts the idle rollout GPUs join
the actor: ``A`` runs on ``n`` GPUs for the share of the step after the mean generation time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NVLINK_BPS, NET_BPS, PCIE_BPS, LAT_S = 100e9, 25e9, 25e9, 20e-6


@dataclass(frozen=True)
class GpuWorkload:
    name: str
    env_s: float  # one iteration's env stepping on one GPU (0: no env, e.g. LLM)
    infer_s: float  # inference / generation on one GPU
    train_s: float  # training on one GPU
    weight_bytes: float
    state_bytes: float  # what a collocated switch offloads + onloads (weights, grads, optimizer)
    tail_cv: float = 0.0  # coefficient of variation of a generation shard's time
    stages: int = 8  # pipeline micro-batches
    batch: float = 4096  # items (envs or sequences) per iteration
    env_half: float = 0.0  # per-GPU batch at which the env runs at half its saturated speed
    infer_half: float = 0.0  # the same for inference / generation


WORKLOADS = [
    # ManiSkill-style GPU sim + a ~1B policy: env and inference comparable, small weights
    GpuWorkload(
        "embodied PPO, GPU sim + 1B policy",
        env_s=400.0,
        infer_s=300.0,
        train_s=250.0,
        weight_bytes=2e9,
        state_bytes=16e9,
        batch=4096,
        env_half=512,
        infer_half=64,
    ),
    # OpenVLA-OFT 7B on CPU-simulated LIBERO: env-bound rollout, big weights to switch
    GpuWorkload(
        "VLA GRPO, 7B, CPU sim",
        env_s=900.0,
        infer_s=500.0,
        train_s=600.0,
        weight_bytes=14e9,
        state_bytes=112e9,
        batch=1024,
        infer_half=32,
    ),
    # Math GRPO with a 7B LLM: generation-bound with a long tail, no env
    GpuWorkload(
        "LLM GRPO, 7B, long tail",
        env_s=0.0,
        infer_s=3000.0,
        train_s=1200.0,
        weight_bytes=14e9,
        state_bytes=112e9,
        tail_cv=0.35,
        batch=4096,
        infer_half=128,
    ),
]


def _bw(n: int) -> float:
    return NVLINK_BPS if n <= 8 else NET_BPS


def allreduce(n: int, nbytes: float) -> float:
    return 0.0 if n <= 1 else 2 * (n - 1) / n * nbytes / _bw(n) + 2 * math.log2(n) * LAT_S


def tail(n: int, cv: float) -> float:
    return 1.0 + cv * math.sqrt(2 * math.log(max(n, 1))) if n > 1 else 1.0


def eff(batch_per_gpu: float, half: float) -> float:
    return batch_per_gpu / (batch_per_gpu + half) if half > 0 else 1.0


def phases(w: GpuWorkload, roll: int, act: int) -> tuple[float, float, float, float]:
    """(env, inference incl. tail, training, weight sync) seconds on ``roll`` / ``act`` GPUs."""
    env = w.env_s / roll / eff(w.batch / roll, w.env_half)
    infer = w.infer_s / roll / eff(w.batch / roll, w.infer_half) * tail(roll, w.tail_cv)
    train = w.train_s / act + allreduce(act, w.weight_bytes)
    sync = w.weight_bytes / _bw(roll + act) + math.log2(max(roll + act, 2)) * LAT_S
    return env, infer, train, sync


def collocated(w: GpuWorkload, n: int) -> float:
    env, infer, train, sync = phases(w, n, n)
    return env + infer + train + sync + 2 * w.state_bytes / n / PCIE_BPS


def disaggregated(w: GpuWorkload, n: int, realloc: bool = False) -> tuple[float, int]:
    """Best (iteration seconds, rollout GPUs) over the splits."""
    best = (math.inf, 0)
    for roll in range(1, n):
        env, infer, train, sync = phases(w, roll, n - roll)
        rollout = env + infer
        if realloc and w.tail_cv > 0:
            mean = env + infer / tail(
                roll, w.tail_cv
            )  # the bulk finishes here; the tail leaves rollout GPUs idle
            idle = rollout - mean
            done_on_n = min(
                idle * n / (n - roll), train
            )  # work the whole cluster finishes during the tail
            train = train - done_on_n * (n - roll) / n
        t = max(rollout, train) + min(rollout, train) / w.stages + sync
        best = min(best, (t, roll))
    return best


def hybrid(w: GpuWorkload, n: int) -> float:
    if w.env_s == 0:
        return collocated(w, n)
    best = math.inf
    for e in range(1, n):
        env, _, _, _ = phases(w, e, n)
        _, infer, train, sync = phases(w, n - e, n)
        best = min(
            best,
            max(env, infer)
            + min(env, infer) / w.stages
            + train
            + sync
            + 2 * w.state_bytes / n / PCIE_BPS,
        )
    return best


def table(
    sizes: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024),
) -> list[dict[str, float | str]]:
    """One row per (workload, n): each mode's iteration seconds and speed-up over collocated."""
    rows: list[dict[str, float | str]] = []
    for w in WORKLOADS:
        for n in sizes:
            c = collocated(w, n)
            d, roll = disaggregated(w, n)
            r, _ = disaggregated(w, n, realloc=True)
            h = hybrid(w, n)
            rows.append(
                {
                    "workload": w.name,
                    "gpus": n,
                    "collocated_s": c,
                    "disaggregated_s": d,
                    "rollout_gpus": roll,
                    "hybrid_s": h,
                    "realloc_s": r,
                    "disagg_x": c / d,
                    "hybrid_x": c / h,
                    "best_x": c / min(d, h, r),
                    "realloc_gain": d / r,
                }
            )
    return rows
