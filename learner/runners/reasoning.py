"""LLM reasoning runner (``runner: reasoning``): SFT warm-up, then GRPO-family RL.

Dataflow per step (one screen, both drivers):

    prompts -> rollout group --(channel, micro-batches)--> reward group --(channel)--> actor
    actor --(WeightStore, versioned)--> rollout group

``placement`` decides the mode with the shared grammar: the same slots for every component
is *collocated* (phases time-share the slots; rollout offloads while the actor trains); disjoint
slots is *disaggregated* (rollout generates step ``s+1`` while the actor trains step ``s``,
with weights at most one version stale). ``train.driver: inline`` runs the same worker classes
in this process, which is the fastest way to run the tiny CPU demo.

The roles are the ones every on-policy runner shares -- :class:`~learner.actor.worker.ActorWorker`,
:class:`~learner.rollout.workers.RolloutWorker`, :class:`~learner.rollout.workers.EnvWorker` --
hosting the reasoning parts (:class:`~learner.llm.learner.ReasoningLearner`,
:class:`~learner.llm.generation.LLMGeneration`, :class:`~learner.llm.scoring.Scorer`). One loop
(:func:`_train`) drives both drivers (:data:`DRIVERS`), which differ only in how a step's calls
travel: direct calls in turn, or worker groups and channels.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from learner.actor.worker import ActorWorker
from learner.llm.generation import LLMGeneration
from learner.llm.learner import ReasoningLearner
from learner.llm.scoring import Scorer
from learner.metrics import checkpoint_dir, write_run
from learner.rollout.workers import EnvWorker, RolloutWorker
from learner.runners.reasoning_config import ReasoningConfig
from learner.runners.reasoning_io import RunData, prepare_data, write_curve
from learner.runners.registry import RUNNERS, RunnerSpec

__all__ = ["ReasoningConfig", "run"]

log = logging.getLogger(__name__)


class _Curve:
    """Rows of the learning curve, stamped with elapsed time."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.rows: list[dict[str, Any]] = []

    def add(self, step: int, phase: str, metrics: dict[str, float]) -> dict[str, Any]:
        row = {
            "step": step,
            "phase": phase,
            "elapsed_s": round(time.perf_counter() - self.t0, 2),
            **metrics,
        }
        self.rows.append(row)
        log.info(
            "%s step %d: %s",
            phase,
            step,
            {
                k: round(v, 4) if isinstance(v, float) else v
                for k, v in row.items()
                if k not in ("step", "phase")
            },
        )
        return row


def _step_prompts(data: RunData, rng: random.Random, n: int) -> tuple[list[str], list[str]]:
    picks = [data.train[rng.randrange(len(data.train))] for _ in range(n)]
    return [e.prompt for e in picks], [e.answer for e in picks]


def _sft_phase(
    cfg: ReasoningConfig,
    curve: _Curve,
    sft: Callable[[int, int], dict[str, Any]],
    evaluate: Callable[[int], dict[str, float]],
) -> int:
    """SFT in chunks of ``sft.eval_every`` steps (one chunk when 0), evaluating after each; returns
    the weight version after SFT. The curve rows of phase ``sft`` are an SFT-only learning curve."""
    total = cfg.sft.steps
    every = cfg.sft.eval_every or total
    version = 0
    for start in range(0, total, every):
        out = sft(start, min(start + every, total))
        version = int(out["weight_version"])
        curve.add(0, "sft", {**out, **evaluate(version)})  # sft/step says where in SFT
    return version


def _should_eval(cfg: ReasoningConfig, step: int) -> bool:
    every = cfg.train.eval_every
    return step == cfg.train.steps or (every > 0 and step % every == 0)


def _finish(
    cfg: ReasoningConfig,
    curve: _Curve,
    out_dir: Path,
    actor_save: Any,
    extra: dict[str, Any],
    eval_path: str | None = None,
    eval_source: str = "heldout-file",
) -> dict[str, Any]:
    files = write_curve(curve.rows, out_dir)
    evals = [r for r in curve.rows if "eval/accuracy" in r and r["phase"] != "init"]
    sft_rows = [r for r in evals if r["phase"] == "sft"]
    after_sft = sft_rows[-1] if sft_rows else (evals[0] if evals else None)
    result = {
        "eval_source": eval_source,  # "heldout-file" or an explicit split-from-train
        "initial_accuracy": after_sft["eval/accuracy"]
        if after_sft
        else None,  # after SFT, before RL
        "best_sft_accuracy": max((r["eval/accuracy"] for r in sft_rows), default=None),
        "final_accuracy": evals[-1]["eval/accuracy"] if evals else None,
        "best_accuracy": max((r["eval/accuracy"] for r in evals), default=None),
        "rl_steps": max((r["step"] for r in curve.rows if r["phase"] == "rl"), default=0),
        "elapsed_s": round(time.perf_counter() - curve.t0, 1),
        **files,
        **extra,
    }
    result["checkpoint"] = None
    if cfg.train.save_checkpoint:
        path = checkpoint_dir(out_dir, result["rl_steps"])
        result["checkpoint"] = actor_save(str(path), {"eval_path": eval_path})
    history = [
        {
            "iteration": r["step"],
            "time/wall_s": r["elapsed_s"],
            **{k: v for k, v in r.items() if k not in ("step", "elapsed_s")},
        }
        for r in curve.rows
    ]
    result = write_run(
        out_dir,
        "reasoning",
        {**result, "iterations": result["rl_steps"]},
        history,
        title=cfg.name or Path(out_dir).name,
        tensorboard=True,
    )
    return {**result, "png": result["curves"]}


class _Driver(Protocol):
    """How a step's calls reach the three roles: :class:`_Inline` or :class:`_Groups`."""

    disaggregated: bool  # rollout and actor on disjoint slots: sampling runs one version behind

    def publish(self) -> int: ...
    def evaluate(self, prompts: list[str], answers: list[str], version: int) -> dict: ...
    def sft(self, demos: Any, start: int, stop: int) -> dict[str, Any]: ...
    def resume(self, path: str) -> dict[str, Any]: ...
    def digest(self) -> str: ...
    def launch(self, step: int, prompts: list[str], answers: list[str], version: int) -> None: ...
    def train(self, step: int) -> Any: ...  # ``.wait()`` gives the actor's metrics
    def rollout_version(self) -> dict[str, float]: ...
    def drain(self) -> None: ...
    def save(self, path: str, meta: dict[str, Any]) -> str: ...
    def summary(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


def _checkpoint_version(path: str) -> int:
    """The weight version a checkpoint was published as (its meta.json; no tensors read)."""
    from learner.checkpoint import read_meta

    return int(read_meta(path)[1]["weight_version"])


def _resume(cfg: ReasoningConfig, curve: _Curve, out_dir: Path, d: _Driver) -> tuple[int, int]:
    """``train.resume``: the learner's state from the checkpoint and the earlier rows of the
    curve (those up to its step, when resuming in the same ``out_dir``); (step, version)."""
    from learner.runners.reasoning_io import read_curve

    assert cfg.train.resume is not None
    meta = d.resume(cfg.train.resume)
    start = int(meta["iteration"])
    if start >= cfg.train.steps:
        raise ValueError(
            f"train.resume={cfg.train.resume!r} is at RL step {start}; set train.steps above it "
            "to train further"
        )
    earlier = out_dir / "curve.csv"
    if earlier.is_file():
        curve.rows = [
            {**r, "step": int(r["step"])} for r in read_curve(earlier) if int(r["step"]) <= start
        ]
        curve.t0 -= max((float(r["elapsed_s"]) for r in curve.rows), default=0.0)  # time goes on
    log.info(
        "resumed from %s at RL step %d (weight version %d)",
        cfg.train.resume,
        start,
        meta["weight_version"],
    )
    return start, d.publish()


def _train(cfg: ReasoningConfig, data: RunData, out_dir: Path, d: _Driver) -> dict[str, Any]:
    """SFT, then RL steps until ``train.steps`` or ``train.target_accuracy``, on either driver."""
    curve = _Curve()
    prompts, answers = [e.prompt for e in data.eval], [e.answer for e in data.eval]
    evaluate = lambda v: d.evaluate(prompts, answers, v)  # noqa: E731
    start = 0
    if cfg.train.resume:
        start, version = _resume(cfg, curve, out_dir, d)
    else:
        version = d.publish()
        if data.demos:
            curve.add(-1, "init", evaluate(version))  # before SFT
            version = _sft_phase(cfg, curve, lambda a, b: d.sft(data.demos, a, b), evaluate)
        else:
            curve.add(0, "sft", evaluate(version))
    sft_digest = d.digest()
    rng, n, lag = random.Random(cfg.train.seed), cfg.train.prompts_per_step, int(d.disaggregated)
    for _ in range(start):  # a resumed run draws the prompts the uninterrupted one would
        _step_prompts(data, rng, n)
    base = version - start  # weights version that step 1 samples with
    if cfg.train.steps > start:
        d.launch(start + 1, *_step_prompts(data, rng, n), version)
    for step in range(start + 1, cfg.train.steps + 1):
        training = d.train(step)
        nxt = _step_prompts(data, rng, n) if step < cfg.train.steps else None
        # staleness bound: disaggregated samples step s+1 now, with the weights one version
        # older; collocated (and inline) waits for step s's update and samples with its weights
        if nxt is not None and lag:
            d.launch(step + 1, *nxt, base + step - 1)
        metrics = training.wait()
        if nxt is not None and not lag:
            d.launch(step + 1, *nxt, base + step)
        if _should_eval(cfg, step):
            metrics.update(evaluate(int(metrics["weight_version"]) - lag))
        row = curve.add(step, "rl", {**metrics, **d.rollout_version()})
        target = cfg.train.target_accuracy
        if target is not None and row.get("eval/accuracy", -1.0) >= target:
            break
    d.drain()  # an early stop leaves the next step's generation and scoring running
    extra = {**d.summary(), "sft_digest": sft_digest}
    return _finish(cfg, curve, out_dir, d.save, extra, data.eval_path, data.eval_source)


def _actor_metrics(res: dict[str, Any]) -> dict[str, float]:
    """The actor's ``train`` result as curve columns (its own update time is ``time/train``)."""
    return {k: v for k, v in res.items() if k != "update_s"}


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value

    def wait(self) -> Any:
        return self.value


class _StepCalls:
    """A step in flight on the worker groups: ``wait()`` gives the actor's metrics."""

    def __init__(self, gen: Any, scoring: Any, training: Any, timeout: float) -> None:
        self.calls, self.timeout = (gen, scoring, training), timeout

    def wait(self) -> dict[str, float]:
        gen, scoring, training = self.calls
        gen.wait(self.timeout)
        scoring.wait(self.timeout)
        return _actor_metrics(training.wait(self.timeout)[0])


class _Inline:
    """``train.driver: inline``: the three worker roles in this process, called in turn."""

    disaggregated = False

    def __init__(self, cfg: ReasoningConfig, cluster: Any, data: RunData) -> None:
        from learner.weights import WeightStore

        torch.set_num_threads(cfg.train.torch_threads)
        self.store = store = WeightStore.in_process("reasoning-inline")
        self.actor = ActorWorker(ReasoningLearner, cfg, data.tokenizer_dir, store=store)
        self.rollout = RolloutWorker(LLMGeneration, cfg, data.tokenizer_dir, store=store)
        self.reward = EnvWorker(Scorer, cfg)
        self.next: tuple[list[str], list[str], int] | None = None
        self.steps = 0

    def publish(self) -> int:
        return self.actor.publish()

    def evaluate(self, prompts: list[str], answers: list[str], version: int) -> dict[str, float]:
        return self.rollout.evaluate(version, prompts, answers)

    def sft(self, demos: Any, start: int, stop: int) -> dict[str, Any]:
        return self.actor.sft(demos, start, stop)

    def resume(self, path: str) -> dict[str, Any]:
        self.store.rebase(_checkpoint_version(path) - 1)
        return self.actor.load(path)

    def digest(self) -> str:
        return self.actor.digest()

    def launch(self, step: int, prompts: list[str], answers: list[str], min_version: int) -> None:
        self.next = (prompts, answers, min_version)

    def train(self, step: int) -> _Done:
        assert self.next is not None
        prompts, answers, version = self.next
        self.next, self.steps = None, step
        batch = self.reward.side.score(self.rollout.run_iteration(version, prompts, answers))
        return _Done(_actor_metrics(self.actor.train([batch])))

    def rollout_version(self) -> dict[str, float]:
        return {}

    def drain(self) -> None:
        self.next = None

    def save(self, path: str, meta: dict[str, Any]) -> str:
        return self.actor.save(path, self.steps, meta)

    def summary(self) -> dict[str, Any]:
        return {
            "driver": "inline",
            "mode": "inline",
            "actor_digest": self.actor.digest(),
            "actor_version": self.actor.version,
            "rollout_versions": [self.rollout.weight_version],
            "rollout_digests": [self.rollout.digest()],
        }

    def close(self) -> None:
        """Nothing to release: the in-process store goes with the run."""


class _Groups:
    """``train.driver: workers``: worker groups on the configured placement, micro-batches
    streaming rollout -> reward -> actor through channels keyed by step."""

    def __init__(self, cfg: ReasoningConfig, cluster: Any, data: RunData) -> None:
        from learner.channel import Channel
        from learner.placement import parse_placement
        from learner.weights import WeightStore
        from learner.worker import WorkerGroup

        self.cfg, self.timeout = cfg, cfg.train.timeout_s
        placement = parse_placement(dict(cfg.placement), cluster.num_slots)
        ranks = placement["actor"].num_processes
        if ranks > 1 and cfg.algorithm.estimator.needs_critic:
            raise ValueError(
                f"placement actor: {ranks} processes with algorithm.adv={cfg.algorithm.adv!r}; "
                "the critic trains in one actor process: place the actor on one slot"
            )
        self.mode = placement.mode
        self.disaggregated = not placement.shares_slots("rollout", "actor")
        run_id = uuid.uuid4().hex[:8]
        self.store = WeightStore.create(f"reasoning-{run_id}")
        self.gen_ch = Channel.create(f"reasoning-{run_id}-gen")
        self.scored_ch = Channel.create(f"reasoning-{run_id}-scored")
        self.groups: list[Any] = []
        self.pending: tuple[Any, Any, int] | None = None
        self.steps = 0
        try:
            launch = lambda role, name, *a, **kw: self._add(  # noqa: E731
                WorkerGroup.launch(role, name, cluster, placement[name], *a, **kw)
            )
            self.actor = launch(
                ActorWorker, "actor", ReasoningLearner, cfg, data.tokenizer_dir, store=self.store
            )
            self.rollout = launch(
                RolloutWorker, "rollout", LLMGeneration, cfg, data.tokenizer_dir, store=self.store
            )
            self.reward = launch(EnvWorker, "reward", Scorer, cfg)
            if self.actor.size > 1:  # data-parallel actor ranks: one process group
                address = self.actor.execute_on([0], "dist_address").wait(self.timeout)[0]
                self.actor.call("init_dist", address).wait(self.timeout)
        except BaseException:
            self.close()
            raise

    def _add(self, group: Any) -> Any:
        self.groups.append(group)
        return group

    def _actor(self, method: str, *args: Any) -> Any:
        """Every actor rank (several ranks step, gather and save together); rank 0's answer."""
        return self.actor.call(method, *args).wait(self.timeout)[0]

    def publish(self) -> int:
        return self._actor("publish")

    def evaluate(self, prompts: list[str], answers: list[str], version: int) -> dict[str, float]:
        return self.rollout.execute_on([0], "evaluate", version, prompts, answers).wait(
            self.timeout
        )[0]

    def sft(self, demos: Any, start: int, stop: int) -> dict[str, Any]:
        return self._actor("sft", demos, start, stop)

    def resume(self, path: str) -> dict[str, Any]:
        self.store.rebase(_checkpoint_version(path) - 1)
        return self._actor("load", path)

    def digest(self) -> str:
        return self._actor("digest")

    def launch(self, step: int, prompts: list[str], answers: list[str], min_version: int) -> None:
        """Start a step's generation (prompts sharded over rollout ranks) and its scoring.

        Scoring starts with generation, not when the loop reaches the step: disaggregated, the
        reward worker then scores step s+1 while the actor trains step s. Started at the step,
        it ran after the update, and the step took reward + update instead of their max
        (measured: 0.62 s vs ~0.43 s). Both channels are keyed by step, so two steps never mix.
        """
        ranks, rewards = self.rollout.size, self.reward.size
        per = -(-len(prompts) // ranks)
        mb = self.cfg.rollout.micro_batch_prompts or per
        args, count = [], 0
        for r in range(ranks):
            lo, hi = r * per, min((r + 1) * per, len(prompts))
            args.append((min_version, prompts[lo:hi], answers[lo:hi], self.gen_ch, step, lo))
            count += -(-(hi - lo) // mb) if hi > lo else 0
        gen = self.rollout.call_per_rank("run_iteration", args)
        shares = [count // rewards + (r < count % rewards) for r in range(rewards)]
        scoring = self.reward.call_per_rank(
            "run_iteration", [(self.gen_ch, self.scored_ch, step, c) for c in shares]
        )
        self.pending = (gen, scoring, count)

    def train(self, step: int) -> _StepCalls:
        """Start the actor on step ``step``'s scored micro-batches; ``wait()`` gives its metrics."""
        assert self.pending is not None
        (gen, scoring, count), self.pending, self.steps = self.pending, None, step
        # rank 0 takes the step off the channel; the learner hands it to the other ranks
        training = self.actor.call_per_rank(
            "train_stream",
            [
                (self.scored_ch, step, count if r == 0 else 0, self.timeout)
                for r in range(self.actor.size)
            ],
        )
        return _StepCalls(gen, scoring, training, self.timeout)

    def rollout_version(self) -> dict[str, float]:
        version = self.rollout.execute_on([0], "weight_version_now").wait(self.timeout)[0]
        return {"rollout/weight_version": float(version)}

    def drain(self) -> None:
        if self.pending is not None:
            self.pending[0].wait(self.timeout)
            self.pending[1].wait(self.timeout)
            self.pending = None

    def save(self, path: str, meta: dict[str, Any]) -> str:
        return self._actor("save", path, self.steps, meta)

    def summary(self) -> dict[str, Any]:
        """Every rollout rank ends on the final weights; versions and digests to compare."""
        final = self._actor("get_version")
        self.rollout.call("sync_weights", final, self.timeout).wait(self.timeout)
        return {
            "driver": "workers",
            "mode": self.mode,
            "disaggregated": self.disaggregated,
            "actor_version": final,
            "rollout_versions": self.rollout.call("weight_version_now").wait(self.timeout),
            "actor_digest": self._actor("digest"),
            "rollout_digests": self.rollout.call("digest").wait(self.timeout),
        }

    def close(self) -> None:
        for g in self.groups:
            g.shutdown()
        for h in (self.gen_ch, self.scored_ch, self.store):
            try:
                h.close()
            except Exception as e:  # best effort: the run's result matters more than cleanup
                log.debug("closing %r: %s", h, e)


DRIVERS: dict[str, type] = {"inline": _Inline, "workers": _Groups}


def run(cfg: ReasoningConfig, cluster: Any) -> dict[str, Any]:
    """Entry point of ``rlinf train`` for ``runner: reasoning``; returns the final metrics."""
    out_dir = Path(cfg.train.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.train.seed)
    data = prepare_data(cfg, out_dir)
    log.info(
        "reasoning: %d train prompts, %d eval prompts, %d demonstrations, driver=%s",
        len(data.train),
        len(data.eval),
        len(data.demos),
        cfg.train.driver,
    )
    driver = DRIVERS[cfg.train.driver](cfg, cluster, data)
    try:
        return _train(cfg, data, out_dir, driver)
    finally:
        driver.close()


RUNNERS.add("reasoning", RunnerSpec(config_cls=ReasoningConfig, run=run))
