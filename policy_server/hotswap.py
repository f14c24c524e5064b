"""Double-buffered policy weights: load a new version beside the serving policy, swap between batches.

Why two instances: a push must never mutate the policy a batch is using, and building a fresh
policy per push would double peak memory churn on every swap. The *spare* (a
:meth:`~policy_server.policy.SwappablePolicy.clone` of the served policy) receives the new
weights — a push with a missing, extra or mis-shaped tensor is refused naming it — and the
batcher then calls :meth:`ModelSlot.activate` between two batches, a pointer swap. The old
active becomes the next spare only after the swap, when no batch can be using it any more.
Pushes are serialised by the caller (one at a time). No torch here: the policy loads its own
weights.
"""

from __future__ import annotations

import logging
import threading

from policy_server.policy import ServedPolicy, SwappablePolicy

log = logging.getLogger(__name__)


class WeightLoadError(ValueError):
    """A pushed blob that cannot be loaded into the served policy; says why."""


class ModelSlot:
    """The serving policy (``active``) plus a spare instance that receives pushed weights."""

    def __init__(self, policy: ServedPolicy, version: int = 0) -> None:
        self.active: ServedPolicy = policy
        self.version = version
        self._spare: SwappablePolicy | None = policy.clone() if isinstance(policy, SwappablePolicy) else None
        self._staged: int | None = None  # version loaded into the spare, awaiting activation
        self._lock = threading.Lock()  # guards spare/active pointers across threads

    @property
    def swappable(self) -> bool:
        return self._spare is not None

    def load_spare(self, data: bytes, version: int) -> int:
        """Load safetensors ``data`` into the spare (runs in a worker thread); returns #tensors."""
        with self._lock:
            spare = self._spare
        if spare is None:
            raise WeightLoadError(f"policy {type(self.active).__name__} does not take weight pushes "
                                  "(it has no clone() / load_weights())")
        try:
            num = spare.load_weights(bytes(data))
        except ValueError as e:
            raise WeightLoadError(str(e)) from None
        with self._lock:
            self._staged = version
        return num

    def activate(self, version: int) -> None:
        """Make the spare (loaded with ``version``) the serving policy. Call only between batches."""
        with self._lock:
            if self._staged != version or self._spare is None:
                raise RuntimeError(f"cannot activate weight version {version}: staged is {self._staged}")
            self.active, self._spare = self._spare, self.active  # type: ignore[assignment]
            self.version = version
            self._staged = None
