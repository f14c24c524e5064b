"""Profile and cost model of LLM GRPO (``runner: reasoning``), and its measurement.

Profile (in this process, the inline driver's own worker classes, 1 warm-up + 2 timed steps of
the config's ``train.prompts_per_step``): ``generate`` (all micro-batches of a step), ``reward``,
``logprob`` (old log-probs), ``train`` (the policy update), ``publish`` (weights to CPU), the
weights' and one micro-batch's bytes.

Cost of one step per candidate (``h`` = channel hop, ``f`` = store fetch of the weights,
``c`` = one group call, ``k`` micro-batches):

- ``inline``: ``generate + reward + logprob + train + publish`` (one process, no Ray);
- ``collocated`` (worker groups on one slot): the same work on one core, plus ``2 k h`` for the
  micro-batches' two channel trips, ``f`` and the driver's ~6 group calls ``c``;
- ``disaggregated`` (actor on its own slot): generation of step s+1 runs while step s trains
  (one version stale, as the runner documents), so
  ``max(generate + reward + w + f, logprob + train + publish) + 2 h + 6 c``.

``w`` (``times["workers"]``, 0 unless calibrated) is what the worker driver does per step beyond
the inline driver's work: the reward worker receives, decodes and scores each micro-batch in a
process of its own, every micro-batch crosses two channel actors, the actor streams them in. It
is measured by the calibration on the ``collocated`` candidate (measured - predicted without
it, :func:`learner.scheduling.calibrate.calibrate_workers`) and charged to the rollout / reward
slot, where the streaming happens. Without it the disaggregated step was predicted ~40% fast.

On a GPU cluster a collocated step would also pay offload / onload of the rollout and actor
weights (``Worker.offload``); the CPU backend has none, so the term is 0 here.
"""

from __future__ import annotations

import copy
import csv
import logging
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learner.scheduling.candidates import Candidate
from learner.scheduling.comm import CommProfile
from learner.scheduling.cost import Prediction
from learner.scheduling.curves import load_cached, reference_s, store_cached, workload_key

log = logging.getLogger(__name__)


@dataclass
class ReasoningProfile:
    times: dict[str, float] = field(default_factory=dict)
    micro_batches: int = 1
    weight_bytes: int = 0
    batch_bytes: int = 0
    seconds: float = 0.0
    ref_s: float = 0.0  # curves.reference_s() while profiling

    def scaled(self, factor: float) -> ReasoningProfile:
        """Compute times x ``factor``: a calibration."""
        return ReasoningProfile(
            {k: v * factor for k, v in self.times.items()},
            self.micro_batches,
            self.weight_bytes,
            self.batch_bytes,
            self.seconds,
            self.ref_s,
        )


def _workload(cfg: Any) -> dict[str, Any]:
    from rlinf_contracts.config import to_dict

    raw = to_dict(cfg)
    return {k: raw[k] for k in ("model", "rollout", "reward", "algorithm", "actor", "data")} | {
        "prompts": raw["train"]["prompts_per_step"],
        "threads": raw["train"]["torch_threads"],
        "v": 2,
    }


def _short_cfg(cfg: Any, out_dir: str, steps: int) -> Any:
    c = copy.deepcopy(cfg)
    c.sft.steps, c.train.steps, c.train.eval_every = 0, steps, 10_000
    c.train.out_dir, c.train.save_checkpoint, c.train.target_accuracy = out_dir, False, None
    c.data.eval_limit = 8
    return c


def _step(
    rollout: Any, reward: Any, actor: Any, data: Any, rng: random.Random, n: int, version: int
) -> tuple[dict[str, float], int]:
    idx = [rng.randrange(len(data.train)) for _ in range(n)]
    t0 = time.perf_counter()
    batch = rollout.run_iteration(
        version, [data.train[i].prompt for i in idx], [data.train[i].answer for i in idx]
    )
    t1 = time.perf_counter()
    batch = reward.side.score(batch)
    t2 = time.perf_counter()
    m = actor.train([batch])
    t3 = time.perf_counter()
    return {
        "generate": t1 - t0,
        "reward": t2 - t1,
        "logprob": m["time/logprob"],
        "train": m["time/train"],
        "actor_total": t3 - t2,
    }, int(m["weight_version"])


def profile_reasoning(cfg: Any, *, refresh: bool = False) -> ReasoningProfile:
    """The GRPO workload's profile (cached per workload)."""
    import torch

    from learner.actor.worker import ActorWorker
    from learner.llm.generation import LLMGeneration
    from learner.llm.learner import ReasoningLearner
    from learner.llm.scoring import Scorer
    from learner.rollout.workers import EnvWorker, RolloutWorker
    from learner.runners.reasoning_io import prepare_data
    from learner.weights import WeightStore

    key = workload_key("reasoning", _workload(cfg))
    cached = None if refresh else load_cached(key)
    if cached is not None:
        return ReasoningProfile(**cached)
    threads = torch.get_num_threads()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        c = _short_cfg(cfg, tmp, 3)
        torch.set_num_threads(c.train.torch_threads)
        try:
            data = prepare_data(c, Path(tmp))
            store = WeightStore.in_process("sched-profile")
            actor, rollout = (
                ActorWorker(ReasoningLearner, c, data.tokenizer_dir, store=store),
                RolloutWorker(LLMGeneration, c, data.tokenizer_dir, store=store),
            )
            reward, rng = EnvWorker(Scorer, c), random.Random(0)
            version, ref0 = actor.publish(), reference_s()
            runs = []
            for _ in range(3):
                t, version = _step(
                    rollout, reward, actor, data, rng, c.train.prompts_per_step, version
                )
                runs.append(t)
            state = actor.publish_state()
        finally:
            torch.set_num_threads(threads)
    times = {k: statistics.median(r[k] for r in runs[1:]) for k in runs[0]}
    times["publish"] = max(times.pop("actor_total") - times["logprob"] - times["train"], 0.0)
    mb = c.rollout.micro_batch_prompts or c.train.prompts_per_step
    prof = ReasoningProfile(
        times,
        -(-c.train.prompts_per_step // mb),
        sum(v.numel() * v.element_size() for v in state.values()),
        mb * c.rollout.n * (c.rollout.max_new_tokens + 16) * 8 * 3,
    )
    prof.seconds, prof.ref_s = time.perf_counter() - t_start, (ref0 + reference_s()) / 2
    store_cached(key, prof.__dict__)
    return prof


def predict_reasoning(
    prof: ReasoningProfile, comm: CommProfile, cand: Candidate, num_slots: int, cores: int
) -> Prediction:
    """Predicted step time of ``cand`` (see the module docstring for the formulas)."""
    t = prof.times
    gen, act = t["generate"] + t["reward"], t["logprob"] + t["train"] + t["publish"]
    if cand.extra.get("train.driver") == "inline":
        return Prediction(cand, gen + act, 0.0, {"generate+reward": gen, "actor": act}, "inline")
    gen += t.get("workers", 0.0)  # the worker driver's streaming work (calibrated)
    from learner.placement import parse_placement

    placement = parse_placement(cand.placement, num_slots)
    same = bool(
        {s % cores for s in placement["rollout"].slots}
        & {s % cores for s in placement["actor"].slots}
    )
    gen *= max(
        comm.core(s % cores) for s in placement["rollout"].slots
    )  # calibrated core slowdowns
    act *= max(comm.core(s % cores) for s in placement["actor"].slots)
    h = comm.hop(same, prof.batch_bytes)
    f = comm.weight_fetch(prof.weight_bytes / 1024)
    calls = 6 * comm.call_s
    if same:
        step = gen + act + 2 * prof.micro_batches * h + f + calls
        parts = {"generate+reward": gen, "actor": act, "hops": 2 * prof.micro_batches * h}
    else:
        step = max(gen + f, act) + 2 * h + calls
        parts = {"generate+reward": gen + f, "actor": act, "hops": 2 * h}
    parts.update(weight_fetch=f, calls=calls, workers=t.get("workers", 0.0))
    return Prediction(cand, step, comm.ray_init_s + comm.spawn_s, parts, placement.mode)


def measure_reasoning(
    cfg: Any, cand: Candidate, cluster: Any, *, iterations: int = 4, warmup: int = 1
) -> float:
    """Median seconds per RL step of ``cand`` on the real runner (SFT and eval off)."""
    from learner.runners import get_runner
    from learner.scheduling.candidates import with_candidate

    with tempfile.TemporaryDirectory() as tmp:
        c = with_candidate(_short_cfg(cfg, tmp, warmup + iterations + 1), cand)
        get_runner("reasoning").run(c, cluster)
        with open(Path(tmp) / "curve.csv") as f:
            rows = [r for r in csv.DictReader(f)]
    times = [float(r["elapsed_s"]) for r in rows if r["phase"] in ("sft", "rl")]
    steps = [b - a for a, b in zip(times, times[1:])][warmup:-1]  # the last step also evaluates
    return statistics.median(steps)
