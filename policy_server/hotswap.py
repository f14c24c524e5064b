"""Double-buffered policy weights: load a new version beside the serving one, swap between batches.

Why two instances: a push must never mutate the policy a batch is using, and building a fresh
policy per push would double peak memory churn on every swap. The *spare* (a
:meth:`~policy_server.policy.SwappablePolicy.clone` of the served policy) receives the new
weights — a push with a missing, extra or mis-shaped tensor is refused naming it — and the
batcher then calls :meth:`ModelSlot.activate` between two batches, a pointer swap. The old
active becomes the next spare only after the swap, when no batch can be using it any more.
Pushes are serialised by the caller (one at a time). No torch here: the policy loads its own
weights.

Why decoding happens off the event loop (:func:`decode_push`): the event loop also answers the
robots. A 17 MB push decoded there (msgpack copy of the blob, joining fragments) stalled
inference answers by 30-60 ms on a loaded 2-core machine (benchmarks/ros_online.py). The server
therefore receives a push as its wire fragments and joins / decodes them in the weight-loading
thread; a pusher that sends the blob in fragments keeps every copy on the loop small.
"""

from __future__ import annotations

import logging
import threading

from policy_server.messages import WeightPush
from policy_server.policy import ServedPolicy, SwappablePolicy
from rlinf_contracts.wire import WireError, unpackb

log = logging.getLogger(__name__)


class WeightLoadError(ValueError):
    """A pushed blob that cannot be loaded into the served policy; says why."""


def decode_push(parts: list[bytes | str]) -> WeightPush:
    """One pushed message, as the fragments it arrived in, -> :class:`WeightPush`.

    Runs in the weight-loading thread, not on the event loop (see the module docstring).

    >>> from rlinf_contracts.wire import packb
    >>> frame = packb(WeightPush(data=b"abc", version=3).to_wire())
    >>> decode_push([frame[:5], frame[5:]]).version
    3
    """
    frames = [p for p in parts if not isinstance(p, str)]
    if len(frames) != len(parts):
        raise WireError("weight pushes must be binary msgpack frames, got a text frame")
    return WeightPush.from_wire(unpackb(frames[0] if len(frames) == 1 else b"".join(frames)))


class ModelSlot:
    """The serving policy (``active``) plus a spare instance that receives pushed weights."""

    def __init__(self, policy: ServedPolicy, version: int = 0) -> None:
        self.active: ServedPolicy = policy
        self.version = version
        self._spare: SwappablePolicy | None = (
            policy.clone() if isinstance(policy, SwappablePolicy) else None
        )
        self._staged: int | None = None  # version loaded into the spare, awaiting activation
        self._lock = threading.Lock()  # guards spare/active pointers across threads

    @property
    def swappable(self) -> bool:
        return self._spare is not None

    def load_spare(self, data: bytes, version: int) -> int:
        """Load safetensors ``data`` (``rlinf_contracts.weight_blob``) into the spare, in a worker
        thread; returns #tensors."""
        with self._lock:
            spare = self._spare
        if spare is None:
            raise WeightLoadError(
                f"policy {type(self.active).__name__} does not take weight pushes "
                "(it has no clone() / load_weights())"
            )
        try:
            num = spare.load_weights(bytes(data))
        except ValueError as e:
            raise WeightLoadError(str(e)) from None
        with self._lock:
            self._staged = version
        return num

    def activate(self, version: int) -> None:
        """Make the spare (loaded with ``version``) the serving policy. Call only between
        batches."""
        with self._lock:
            spare, serving = self._spare, self.active
            # a spare exists only when the serving policy is swappable (``__init__`` cloned it)
            if self._staged != version or spare is None or not isinstance(serving, SwappablePolicy):
                raise RuntimeError(
                    f"cannot activate weight version {version}: staged is {self._staged}"
                )
            self.active, self._spare = spare, serving
            self.version = version
            self._staged = None
