"""The weight-flow halves of the worker roles every runner shares: who publishes, who follows.

Why a module of its own: the embodied and reasoning runners both have an actor that trains and
publishes to a :class:`learner.weights.WeightStore`, and rollout workers that load the newest
version before they act. The version bookkeeping (resume offsets, waiting for a minimum
version, never reloading a version already held) is written once here; a worker only says
what its weights are (:meth:`WeightPublisher.publish_state`) or how to load them
(:meth:`WeightSubscriber.load_weights`).
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

__all__ = ["WeightPublisher", "WeightSubscriber", "weights_digest"]

StateDict = dict[str, torch.Tensor]


def weights_digest(model: torch.nn.Module | StateDict) -> str:
    """Short hash of all parameters: equal digests = identical weights (for sync checks)."""
    h = hashlib.sha1()
    state = model if isinstance(model, dict) else model.state_dict()
    for k, v in sorted(state.items()):
        h.update(k.encode())
        h.update(v.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


class WeightPublisher:
    """Actor role: rank 0 pushes the trained weights to ``self.store`` and counts versions.

    The store counts publications from 1; a resumed run sets ``version_base`` so the first
    publish after a resume reports the checkpoint's version again and then continues it.
    """

    store: Any = None
    version: int = 0
    version_base: int = 0
    rank: int = 0

    def publish_state(self) -> StateDict:
        """The tensors rollout workers load (CPU, detached; LoRA merged)."""
        raise NotImplementedError

    def publish(self) -> int:
        """Publish the current weights (rank 0 only); returns the run's weight version."""
        if self.rank == 0 and self.store is not None:
            self.version = self.version_base + int(self.store.publish(self.publish_state()))
        return self.version

    def get_version(self) -> int:
        return self.version

    def digest(self) -> str:
        """Digest of the weights rollout workers receive, comparable to theirs."""
        return weights_digest(self.publish_state())


class WeightSubscriber:
    """Rollout role: load the newest weights from ``self.store`` before generating."""

    store: Any = None

    @property
    def weight_version(self) -> int:
        """Version of the weights loaded now (0 / -1 before the first load)."""
        raise NotImplementedError

    def load_weights(self, state: StateDict, version: int) -> None:
        raise NotImplementedError

    def sync_weights(self, min_version: int = 0, timeout: float | None = None) -> int:
        """Load the newest published weights, first waiting until ``min_version`` exists."""
        if self.store.version() < min_version:
            self.store.wait_newer(min_version - 1, timeout=timeout)
        if self.store.version() > self.weight_version:
            version, state = self.store.latest()
            self.load_weights(state, version)
        return self.weight_version
