"""The rollout and env roles of every on-policy runner: generation and its feedback.

One :class:`RolloutWorker` and one :class:`EnvWorker` for the embodied and the reasoning
runners; what differs is the part each hosts, a class passed in by the runner's topology:

- rollout: ``learner.rollout.embodied.PolicySampler`` (actions for env observations) or
  ``learner.llm.generation.LLMGeneration`` (completions for prompts);
- env side: ``learner.rollout.embodied.EnvStepper`` (env steps for actions) or
  ``learner.llm.scoring.Scorer`` (rewards for completions).

The rollout worker owns what both generators share: following the actor's weights
(:class:`learner.roles.WeightSubscriber`, waiting for a minimum version), never swapping them
under a running generation (a lock: Ray may call it concurrently), and freeing the slot's
memory between phases (``onload`` / ``offload``). Why a class is passed and not a registry name:
see :mod:`learner.actor.worker`.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

import torch

from learner.roles import WeightSubscriber
from learner.worker import Worker

__all__ = ["EnvPart", "EnvWorker", "RolloutPart", "RolloutWorker"]


class RolloutPart(Protocol):
    """What a :class:`RolloutWorker` hosts (constructed ``cls(*args, rank=, world_size=)``)."""

    timeout: float | None  # how long to wait for a minimum weight version

    @property
    def weight_version(self) -> int: ...

    def load_weights(self, state: dict[str, torch.Tensor], version: int) -> None: ...

    def run_iteration(self, *args: Any) -> Any:
        """Generate one step's samples (sends them on, or returns them)."""
        ...

    def onload(self) -> None: ...

    def offload(self) -> None: ...

    def digest(self) -> str: ...


class RolloutWorker(WeightSubscriber, Worker):
    """Hosts one generator; syncs to the newest weights (at least ``min_version``) per call."""

    def __init__(self, generator_cls: type, *args: Any, store: Any = None) -> None:
        from learner.weights import WeightStore

        self.generator: RolloutPart = generator_cls(
            *args, rank=self.rank, world_size=self.world_size
        )
        self.store = WeightStore.connect(store) if isinstance(store, str) else store
        self._lock = threading.RLock()

    @property
    def weight_version(self) -> int:
        return self.generator.weight_version

    def load_weights(self, state: dict[str, torch.Tensor], version: int) -> None:
        self.generator.load_weights(state, version)

    def _with_weights(self, min_version: int, method: str, *args: Any) -> Any:
        with self._lock:
            self.generator.onload()
            self.sync_weights(min_version, self.generator.timeout)
            out = getattr(self.generator, method)(*args)
            self.generator.offload()
            return out

    def run_iteration(self, min_version: int, *args: Any) -> Any:
        """One step's generation with weights of at least ``min_version``."""
        return self._with_weights(min_version, "run_iteration", *args)

    def evaluate(self, min_version: int, *args: Any) -> dict[str, float]:
        """The generator's held-out evaluation, with weights of at least ``min_version``."""
        return self._with_weights(min_version, "evaluate", *args)

    def weight_version_now(self) -> int:
        return self.weight_version

    def digest(self) -> str:
        return self.generator.digest()


class EnvPart(Protocol):
    """What an :class:`EnvWorker` hosts (constructed ``cls(*args, rank=, world_size=)``)."""

    spec: Any  # the env's spec; None for a scorer

    def run_iteration(self, *args: Any) -> Any:
        """Answer one step's messages of the rollout worker on the channels."""
        ...


class EnvWorker(Worker):
    """Hosts the env side: env shards that step on actions, or a scorer of completions."""

    def __init__(self, side_cls: type, *args: Any) -> None:
        self.side: EnvPart = side_cls(*args, rank=self.rank, world_size=self.world_size)

    def env_spec(self) -> Any:
        """The env's spec (``None`` for a scorer)."""
        return self.side.spec

    def run_iteration(self, *args: Any) -> Any:
        """One step's feedback: answer the rollout worker's messages on the channels."""
        return self.side.run_iteration(*args)

    def close(self) -> None:
        close = getattr(self.side, "close", None)
        if callable(close):
            close()
