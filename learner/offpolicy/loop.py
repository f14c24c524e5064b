"""The learner's loop: pull experience, pay the UTD debt, publish, log, checkpoint -- until done.

::

    source.pull --(steps | episodes)--> replay --> updates (utd_ratio per transition) --> publish
        ^                                                                                    |
        +------------------------ env acts with the newest weights <-------------------------+

Finished episodes also go to the episode store (``<out_dir>/episodes``, ``source: online``) and
to the success / return statistics. A metrics row every ``train.log_every`` transitions (its
``iteration`` is the row index; checkpoints are named by it), a checkpoint every
``train.checkpoint_every`` transitions and at the end. ``train.resume`` restores a checkpoint
(``learner.offpolicy.state``) and refills the replay from the episode store it names. SIGINT /
SIGTERM end training after the current iteration, and the end is the same as a budget's: the
final checkpoint, then the final eval (a second signal interrupts at once).
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from learner.metrics import checkpoint_dir, prior_history
from learner.offpolicy.config import OffPolicyConfig
from learner.offpolicy.learner import OffPolicyLearner
from learner.runners.budget import Budget, setup_reserve_s
from learner.runners.fit import Cadence
from learner.runners.progress import BudgetBar
from rlinf_contracts.config import to_dict

log = logging.getLogger(__name__)


def store_path(cfg: OffPolicyConfig) -> str:
    return cfg.train.episode_store or str(Path(cfg.train.out_dir) / "episodes")


class TrainLoop:
    """``write_episodes=False`` when the source stores episodes itself (the robots' ingest writes
    ``episode_store`` before acknowledging); checkpoints still name that store for a restart."""

    def __init__(
        self,
        cfg: OffPolicyConfig,
        core: OffPolicyLearner,
        write_episodes: bool = True,
        episode_store: str | None = None,
    ) -> None:
        self.cfg, self.core = cfg, core
        self.store_name = episode_store or (store_path(cfg) if cfg.train.store_online else None)
        self.extra_metrics: Any = None  # () -> dict of source metrics added to every row
        self.iteration, self.version = 0, 0
        self.history: list[dict[str, float]] = []
        self.recent: deque[tuple[bool, float]] = deque(maxlen=100)
        self.budget: Budget | None = None  # the running budget (the live view shows time left)
        self.save_s = 0.0  # the last checkpoint's save time: the final one is kept in the budget
        if cfg.train.resume:
            self._resume(cfg.train.resume)
            self.history = prior_history(cfg.train.out_dir, self.iteration)
        self.store = None
        if cfg.train.store_online and write_episodes:
            from rlinf_data.store import EpisodeStore

            self.store = EpisodeStore(store_path(cfg))

    def _resume(self, path: str) -> None:
        from learner.offpolicy.state import load

        meta = load(self.core, path)
        self.iteration, self.version = int(meta["iteration"]), int(meta["weight_version"])
        source = meta.get("episode_store")
        if source:
            self.core.refill(source)
        log.info(
            "resumed from %s: %d env steps, %d updates, replay %d online rows",
            meta["path"],
            self.core.env_steps,
            self.core.updates,
            self.core.replay.size("online"),
        )

    def run(self, source: Any, seconds_left: float | None) -> dict[str, Any]:
        """Train until ``train.env_steps`` or the budget; returns the final checkpoint and
        history."""
        cfg, core = self.cfg, self.core
        budget, logger = Budget.start(seconds_left), self._logger()
        bar = self._bar(budget)
        self.budget = budget
        wall0 = self.history[-1].get("time/wall_s", 0.0) if self.history else 0.0
        checkpoints = Cadence.after(cfg.train.checkpoint_every, core.env_steps)
        with stop_on_signal() as stop:
            while core.env_steps < cfg.train.env_steps and not budget.training_over():
                if stop.is_set():
                    log.info("stop requested: ending training, writing the final checkpoint")
                    break
                for ep in source.pull(core):
                    self._finished(ep)
                core.train_owed()
                self.version = source.publish(core)
                if not budget.eval_reserve_s:  # as soon as a step was measured, not at a row
                    self._reserve_eval(budget, source.step_s())
                bar.advance(core.env_steps, **self._shown(logger))
                if core.env_steps >= (self.iteration + 1) * cfg.train.log_every:
                    self._log(logger, budget, wall0, source.step_s())
                if checkpoints.due(core.env_steps):
                    self.save()
        if not self.history or self.history[-1]["env_steps"] < core.env_steps:
            self._log(logger, budget, wall0, source.step_s())
        bar.advance(core.env_steps, force=True, **self._shown(logger))
        bar.close()
        path = self.save()
        logger.close()
        return {
            "checkpoint": str(path),
            "history": self.history,
            "last": dict(logger.last),
            "counters": core.counters(),
            "weight_version": self.version,
        }

    def _finished(self, ep: Any) -> None:
        self.core.episodes += 1
        self.recent.append((bool(ep.info.success), float(ep.steps["reward"].sum())))
        if self.store is not None:
            self.store.write(ep)

    def _logger(self) -> Any:
        from learner.metrics import MetricsLogger

        c = self.cfg.train
        total = math.ceil(c.env_steps / c.log_every)
        return MetricsLogger(
            c.out_dir,
            total,
            min(self.iteration, total),
            c.tensorboard,
            False,  # the console bar is self._bar's: it counts env steps, not rows
            desc=self.cfg.name,
            time_budget_s=c.time_budget_s,
        )

    def _bar(self, budget: Budget) -> BudgetBar:
        """The console bar over env steps (transitions received when robots stream), with its
        total and ETA bounded by the budget (:mod:`learner.runners.progress`)."""
        c = self.cfg
        return BudgetBar(
            c.train.env_steps,
            budget,
            unit="transitions" if c.ingest.enabled else "env steps",
            desc=c.name,
            enabled=c.train.progress,
            start=self.core.env_steps,
        )

    def _shown(self, logger: Any) -> dict[str, Any]:
        """The bar's postfix: updates done and the last row's headline metrics."""
        from learner.metrics import BAR_KEYS

        shown: dict[str, Any] = {"upd": self.core.updates}
        shown.update({short: logger.last[k] for k, short in BAR_KEYS.items() if k in logger.last})
        return shown

    def _log(self, logger: Any, budget: Budget, wall0: float, step_s: float) -> None:
        core = self.core
        m = core.metrics()
        m.update(
            {
                "env_steps": float(core.env_steps),
                "episodes": float(core.episodes),
                "weight_version": float(self.version),
                "time/wall_s": wall0 + budget.elapsed(),
            }
        )
        if self.extra_metrics is not None:
            m.update(self.extra_metrics())
        if self.recent:
            m["success_rate"] = sum(s for s, _ in self.recent) / len(self.recent)
            m["episode_return"] = sum(r for _, r in self.recent) / len(self.recent)
        prev = self.history[-1] if self.history else None
        if prev is not None and m["time/wall_s"] > prev["time/wall_s"]:
            m["env_steps_per_s"] = (m["env_steps"] - prev["env_steps"]) / (
                m["time/wall_s"] - prev["time/wall_s"]
            )
        self._reserve_eval(budget, step_s)  # again at every row: the step time is a running mean
        logger.log(self.iteration, m)
        self.history.append(logger.history[-1])
        self.iteration += 1

    def _reserve_eval(self, budget: Budget, step_s: float) -> None:
        c = self.cfg
        if budget.seconds is None or not c.train.final_eval or step_s <= 0:
            return
        budget.reserve_eval(
            step_s,
            c.env.num_envs,
            c.eval.num_envs,
            c.eval.episodes,
            len(c.eval.ood_splits),
            self.core.episode_steps,
        )
        budget.eval_reserve_s += setup_reserve_s(budget.seconds, self.save_s)

    def save(self) -> Path:
        from learner.offpolicy.state import save

        path = checkpoint_dir(self.cfg.train.out_dir, self.iteration)
        last = self.history[-1] if self.history else {}
        t0 = time.perf_counter()
        out = save(
            self.core, path, self.iteration, self.version, to_dict(self.cfg), last, self.store_name
        )
        self.save_s = time.perf_counter() - t0
        return out

    def close(self) -> None:
        pass


@contextmanager
def stop_on_signal() -> Iterator[threading.Event]:
    """An event set by the first SIGINT / SIGTERM while the loop runs (the previous handlers
    come back on the first signal, so a second one interrupts as before). Why: a supervisor
    (``rlinf online``, systemd) stops a learner with a signal and its run must still end with a
    final checkpoint. Off the main thread (a Ray worker) signals cannot be caught: a no-op."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    sigs = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in sigs}

    def on_signal(signum: int, _frame: object) -> None:
        for s, h in previous.items():
            signal.signal(s, h)
        stop.set()

    for s in sigs:
        signal.signal(s, on_signal)
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
