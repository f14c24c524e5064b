"""The actor role of every on-policy runner: batches in, one ``update``, weights out.

One class for the embodied (PPO / GRPO on env rollouts) and the reasoning (GRPO-family on LLM
completions) runners: what differs is the *learner* it hosts, a class passed in by the runner's
topology -- :class:`learner.actor.trainer.Trainer` or :class:`learner.llm.learner.ReasoningLearner`.
A hosted learner is an :class:`~learner.algorithms.protocol.Algorithm` (``update(batch)``,
``state_dict``, ``policy()``) plus the few things the role asks of it (:class:`HostedLearner`):
how an arriving channel item is prepared, how the items of a step become one batch, the weights
to publish and the checkpoint format.

Why a class is passed and not a registry name: the worker is rebuilt inside a Ray process, where
only what its arguments import is registered; a class travels by reference and imports itself.

``lend`` (``rollout.reallocate``): slots this rank borrows for the update only
(:mod:`learner.scheduling.realloc`). The fused worker (:mod:`learner.runners.fused`) is this
role with the envs and the sampling in the same process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

import torch

from learner.algorithms.protocol import Algorithm
from learner.roles import WeightPublisher
from learner.scheduling.realloc import widened
from learner.worker import Worker

__all__ = ["ActorWorker", "HostedLearner"]


class HostedLearner(Algorithm, Protocol):
    """An :class:`Algorithm` the actor role can host, built as ``cls(*args, rank=, world_size=)``.

    Optional, for the runners that use them: ``load`` (resume), ``init_from``, ``sft``,
    ``dist_address`` / ``init_dist`` (data-parallel ranks).
    """

    def receive(self, item: Any) -> Any:
        """Work on one channel item as it arrives (e.g. old log-probs), overlapping generation."""
        ...

    def collate(self, items: list[Any], version: int) -> Any:
        """One step's items as the batch :meth:`update` takes; ``version``: the weights trained."""
        ...

    def publish_state(self) -> dict[str, torch.Tensor]:
        """CPU tensors the rollout workers load."""
        ...

    def save(self, path: str, iteration: int, weight_version: int, metrics: dict[str, Any]) -> str:
        """Write a checkpoint; returns its path."""
        ...


class ActorWorker(WeightPublisher, Worker):
    """Hosts one learner; rank 0 publishes to the run's weight store (its name, or the store)."""

    def __init__(
        self, learner_cls: type, *args: Any, store: Any = None, lend: Sequence[int] = ()
    ) -> None:
        from learner.weights import WeightStore

        self.learner: HostedLearner = learner_cls(*args, rank=self.rank, world_size=self.world_size)
        self.store = store if self.rank == 0 else None
        if isinstance(self.store, str):
            self.store = WeightStore.connect(self.store)
        self.lend = tuple(lend)

    def publish_state(self) -> dict[str, torch.Tensor]:
        return self.learner.publish_state()

    def publish(self) -> int:
        """Rank 0 publishes; under a sharded strategy every rank joins the gather first."""
        if self.rank != 0 and getattr(self.learner, "collective_state", False):
            self.learner.publish_state()
        return super().publish()

    def train_stream(self, inp: Any, key: Any, count: int, timeout: float | None) -> dict[str, Any]:
        """Take ``count`` items of ``key`` from channel ``inp`` (each prepared as it arrives),
        then :meth:`train` on them."""
        return self.train(
            [self.learner.receive(inp.get(key=key, timeout=timeout)) for _ in range(count)]
        )

    def train(self, items: list[Any]) -> dict[str, Any]:
        """One ``update`` on a step's items, then publish; the learner's metrics plus ``update_s``
        (collate + update, on this rank) and the new ``weight_version``."""
        t0 = time.perf_counter()
        batch = self.learner.collate(list(items), self.version)
        with widened(self.lend):
            metrics = self.learner.update(batch)
        busy = time.perf_counter() - t0
        return {**metrics, "update_s": busy, "weight_version": float(self.publish())}

    def sft(self, *args: Any) -> dict[str, Any]:
        """The learner's supervised warm-up phase (``sft.steps``), then publish."""
        out = self.learner.sft(*args)  # type: ignore[attr-defined]  # only learners with a warm-up phase get this call
        return {**out, "weight_version": self.publish()}

    def save(self, path: str, iteration: int, metrics: dict[str, Any] | None = None) -> str:
        """Rank 0 writes the checkpoint (ranks hold identical weights); under a sharded strategy
        every rank is called and writes its shards beside it."""
        return self.learner.save(path, iteration, self.version, dict(metrics or {}))

    def load(self, path: str) -> dict[str, Any]:
        """Resume: the learner's state and the weight version the checkpoint was published as."""
        meta = self.learner.load(path)  # type: ignore[attr-defined]  # resumable learners only
        self.version = int(meta["weight_version"])
        published = self.store.version() if self.store is not None else 0
        self.version_base = max(0, self.version - 1 - published)
        return meta

    def init_from(self, path: str) -> str:
        """Weights of another run (``train.init_from``); optimiser and counters start fresh."""
        return self.learner.init_from(path)  # type: ignore[attr-defined]  # learners that take train.init_from only

    def dist_address(self) -> str:
        return self.learner.dist_address()  # type: ignore[attr-defined]  # multi-rank learners only

    def init_dist(self, address: str) -> None:
        self.learner.init_dist(address)  # type: ignore[attr-defined]  # multi-rank learners only
