"""The two client-side buffers of a channel handle: unsent puts and prefetched items.

Why they exist: one call to the channel actor costs about as much as a raw ``ray.put`` +
``ray.get`` of a 1 KB item, so a handle that made one call per item could never reach raw Ray's
rate. :class:`PendingPuts` coalesces consecutive puts of an unbounded channel into one call, and
:class:`ReadBuffer` keeps the extra items a ``get`` fetched so later gets of the same key need no
call at all. Both are plain data structures; the handle does the locking and the calls.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from learner.channel.bundle import BUNDLE_BYTES
from learner.channel.payload import Envelope, staged_bytes

Batches = list[tuple[Any, list[Envelope]]]
"""``(key, envelopes)`` runs in the order they were put."""

COALESCE_ITEMS = 64
"""Unsent puts of one handle are sent once this many items are waiting..."""
COALESCE_BYTES = 1 << 20
"""...or once their inline bytes reach this (large items only add a reference)."""
DEFAULT_PREFETCH = 64
"""Items one ``get`` may fetch ahead on an unbounded channel when ``prefetch`` is not given."""


def envelope_bytes(envelope: Envelope) -> int:
    """Bytes an envelope adds to an actor call: the pickle of an inline item, 0 for a reference
    (or a staged item, which goes to the object store in its send's bundle)."""
    payload = envelope[0]
    return len(payload) if isinstance(payload, bytes) else 0


class PendingPuts:
    """Puts of one handle not yet sent to the actor, in order (unbounded channels only)."""

    def __init__(self) -> None:
        self._batches: Batches = []
        self.items = 0
        self.nbytes = 0
        self.staged = 0  # array bytes waiting for this send's bundle

    def __len__(self) -> int:
        return self.items

    def add(self, key: Any, envelopes: list[Envelope]) -> bool:
        """Queue ``envelopes`` under ``key``; True when the buffer should be sent now."""
        if self._batches and self._batches[-1][0] == key:
            self._batches[-1][1].extend(envelopes)
        else:
            self._batches.append((key, list(envelopes)))
        self.items += len(envelopes)
        self.nbytes += sum(envelope_bytes(e) for e in envelopes)
        self.staged += sum(staged_bytes(e) for e in envelopes)
        return (
            self.items >= COALESCE_ITEMS
            or self.nbytes >= COALESCE_BYTES
            or self.staged >= BUNDLE_BYTES
        )

    def drain(self) -> Batches:
        """Everything queued, oldest first; the buffer is left empty."""
        out, self._batches, self.items, self.nbytes, self.staged = self._batches, [], 0, 0, 0
        return out


class ReadBuffer:
    """Items a handle already popped from the actor but has not handed out, per key, FIFO."""

    def __init__(self) -> None:
        self._queues: dict[Any, deque[Envelope]] = {}

    def count(self, key: Any) -> int:
        queue = self._queues.get(key)
        return len(queue) if queue else 0

    def keys(self) -> list[Any]:
        return [key for key, queue in self._queues.items() if queue]

    def pop(self, key: Any) -> Envelope | None:
        """The oldest buffered envelope of ``key``, or None."""
        queue = self._queues.get(key)
        if not queue:
            return None
        envelope = queue.popleft()
        if not queue:
            del self._queues[key]
        return envelope

    def pop_upto(self, key: Any, n: int) -> list[Envelope]:
        """Up to ``n`` oldest envelopes of ``key``."""
        out: list[Envelope] = []
        while len(out) < n and (envelope := self.pop(key)) is not None:
            out.append(envelope)
        return out

    def pop_weight(self, key: Any, target: float) -> tuple[list[Envelope], float]:
        """The shortest head of ``key`` whose weights reach ``target`` (or all), and its weight."""
        out: list[Envelope] = []
        total = 0.0
        while total < target - 1e-9 and (envelope := self.pop(key)) is not None:
            out.append(envelope)
            total += envelope[1]
        return out, total

    def push_front(self, key: Any, envelopes: list[Envelope]) -> None:
        """Put ``envelopes`` back at the head of ``key`` (a batch that could not complete)."""
        if envelopes:
            self._queues.setdefault(key, deque()).extendleft(reversed(envelopes))

    def push_back(self, key: Any, envelopes: list[Envelope]) -> None:
        """Keep ``envelopes`` (newer than anything buffered) for later gets of ``key``."""
        if envelopes:
            self._queues.setdefault(key, deque()).extend(envelopes)


def resolve_prefetch(name: str, prefetch: int | None, maxsize: int) -> int:
    """``prefetch`` checked, or its default: :data:`DEFAULT_PREFETCH` unbounded, 1 bounded.

    Bounded channels do not prefetch by default because items held by a handle no longer count
    against ``maxsize``, which would loosen the back-pressure the bound exists for.
    """
    if prefetch is None:
        return 1 if maxsize else DEFAULT_PREFETCH
    if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 1:
        raise ValueError(
            f"channel {name!r}: prefetch must be an int >= 1 (1: no prefetch), got {prefetch!r}"
        )
    return prefetch
