"""Fused worker: env, rollout and actor of one rank in one process, no channels.

Why: on a few CPU cores, a collocated placement gains nothing from separate processes (they
would time-share the same cores) but pays a channel round trip per env step. Fusing keeps the
collocated semantics (same slots, same data, same updates) at in-process cost; several ranks
train data-parallel with averaged gradients.

:class:`FusedWorker` is the actor role (:class:`~learner.actor.worker.ActorWorker`) with the
rank's envs in the same process instead of channels from env and rollout workers.

A fused placement of *one* process on this machine needs no Ray at all: :class:`InProcessGroup`
hosts the same :class:`FusedWorker` in the calling process, with the same worker context (CPU
affinity and torch threads follow the slot), and the run skips Ray's start-up and the actor
spawn (``benchmarks/startup.py``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from learner.actor.trainer import Trainer, policy_spec
from learner.actor.worker import ActorWorker
from learner.placement import ComponentPlacement
from learner.rollout.collect import collect_inline
from learner.rollout.embodied import make_stage_envs
from learner.runners.config import EmbodiedConfig
from learner.worker import Worker, WorkerContext, _apply_context


class FusedWorker(ActorWorker):
    """The actor role with this rank's envs beside it: collect in-process, then :meth:`train`."""

    def __init__(self, cfg: EmbodiedConfig, store: Any) -> None:
        """``store``: the name of the run's weight store, or (in-process) the store itself."""
        self.cfg = cfg
        self.envs = make_stage_envs(cfg, self.world_size)
        super().__init__(Trainer, cfg, policy_spec(cfg, self.envs.spec), store=store)
        self.first_stream = self.rank * cfg.rollout.pipeline_stages

    def env_spec(self) -> Any:
        return self.envs.spec

    def run_iteration(self, iteration: int, reset: bool, steps: int) -> dict[str, Any]:
        cfg = self.cfg
        if reset:
            self.envs.reset(cfg.seed, iteration, self.first_stream)
        t0 = time.perf_counter()
        traj = collect_inline(
            self.learner.policy(),
            self.envs,
            steps,
            cfg.algorithm.gamma,
            seed=cfg.seed,
            iteration=iteration,
            first_stream=self.first_stream,
            single_episode=cfg.algorithm.single_episode,
            shared_prefix=cfg.algorithm.shared_prefix,
        )
        traj.stats.revisited = self.envs.revisited * self.envs.group_size if reset else 0
        t1 = time.perf_counter()
        return {"stats": traj.stats, "rollout_s": t1 - t0, **self.train([traj])}

    def close(self) -> None:
        self.envs.close()


class TrainFnWorker(Worker):
    """Runs one whole training function in a placed process: the runners whose run is a single
    :func:`~learner.runners.fit.fit` loop (offline, VLA SFT) need no worker class of their own."""

    def __init__(self, train_fn: Callable[[Any], dict[str, Any]], cfg: Any) -> None:
        self.train_fn, self.cfg = train_fn, cfg

    def train(self) -> dict[str, Any]:
        return self.train_fn(self.cfg)


def run_placed(
    train_fn: Callable[[Any], dict[str, Any]], cfg: Any, cluster: Any, name: str
) -> dict[str, Any]:
    """``train_fn(cfg)`` in one local process pinned like a fused worker (the ``learner`` slot's
    cores and torch threads), which are given back afterwards."""
    from learner.placement import parse_placement

    placement = parse_placement(cfg.placement, cluster.num_slots, ["learner"])
    group = InProcessGroup(
        TrainFnWorker, name, placement["learner"], cluster.slot_kind, train_fn, cfg
    )
    try:
        return group.call("train").wait()[0]
    finally:
        group.shutdown()


class _Done:
    """A finished call: ``wait()`` returns its results, like ``learner.worker.GroupResult``."""

    def __init__(self, results: list[Any]) -> None:
        self.results = results

    def wait(self, timeout: float | None = None) -> list[Any]:
        return self.results


class InProcessGroup:
    """One :class:`~learner.worker.Worker` hosted in this process, with the ``WorkerGroup`` calls
    the runners use (``call``, ``execute_on``, ``size``, ``shutdown``)."""

    def __init__(
        self,
        worker_cls: type[Worker],
        name: str,
        placement: ComponentPlacement,
        slot_kind: str,
        *args: Any,
    ) -> None:
        if placement.num_processes != 1:
            raise ValueError(
                f"in-process group '{name}' hosts one process, placement has "
                f"{placement.num_processes}"
            )
        import torch

        self.name, self.size = name, 1
        self._saved = (
            os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None,
            torch.get_num_threads(),
        )
        if (
            slot_kind == "gpu" and not torch.cuda.is_initialized()
        ):  # as WorkerGroup does for a Ray actor
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, placement.process_slots[0]))
        worker = object.__new__(worker_cls)
        try:
            _apply_context(
                worker,
                WorkerContext(
                    name, 0, 1, tuple(placement.process_slots[0]), slot_kind, os.cpu_count() or 1
                ),
            )
            worker.__init__(*args)  # type: ignore[misc]  # after object.__new__ and the context
        except (
            BaseException
        ):  # e.g. a config error building the model: the pinned cores go back too
            self._restore()
            raise
        self.worker = worker

    def call(self, method: str, *args: Any, **kwargs: Any) -> _Done:
        return _Done([getattr(self.worker, method)(*args, **kwargs)])

    def execute_on(self, ranks: Sequence[int], method: str, *args: Any, **kwargs: Any) -> _Done:
        if list(ranks) != [0]:
            raise IndexError(f"in-process group '{self.name}' has rank 0 only, not {list(ranks)}")
        return self.call(method, *args, **kwargs)

    def shutdown(self) -> None:
        """Close the worker and give this process back its cores and torch threads."""
        close = getattr(self.worker, "close", None)
        if callable(close):
            close()
        self._restore()

    def _restore(self) -> None:
        import torch

        affinity, threads = self._saved
        if affinity is not None:
            os.sched_setaffinity(0, affinity)
        torch.set_num_threads(threads)
