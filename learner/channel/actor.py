"""The Ray actor behind a :class:`~learner.channel.Channel`: keyed FIFO queues of envelopes.

Why an async actor: a blocked ``get`` (empty queue) or ``put`` (full queue) must not stop other
callers, so every blocking operation awaits an ``asyncio.Condition`` of its key instead of
holding a thread. The actor stores *envelopes*, never large payloads: producers ``ray.put`` big
items themselves and send the reference wrapped in a list (so Ray does not resolve it), and
consumers fetch the bytes from the object store directly.

Every method answers with a status string rather than raising, because exceptions crossing Ray
are slow and arrive wrapped; the client turns statuses into ``ChannelFull`` / ``ChannelEmpty``
/ ``ChannelTimeout`` with the channel name.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

OK, FULL, EMPTY, TIMEOUT = "ok", "full", "empty", "timeout"


@dataclass
class Envelope:
    """One queued item: the payload (inline value or ``[ObjectRef]``) and its weight."""

    payload: Any
    is_ref: bool
    has_tensors: bool
    weight: float = 1.0


@dataclass
class _SubQueue:
    """The FIFO of one key, with its running weight and one condition for all waiters."""

    items: deque[Envelope] = field(default_factory=deque)
    weight: float = 0.0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


async def _wait(cond: asyncio.Condition, predicate: Any, timeout: float | None) -> bool:
    """Wait (holding ``cond``) until ``predicate()``; False when ``timeout`` ran out first.

    ``timeout`` 0 means "do not wait"; None means wait for ever (the client warns meanwhile).
    """
    if predicate():
        return True
    if timeout is not None and timeout <= 0:
        return False
    try:
        await asyncio.wait_for(cond.wait_for(predicate), timeout)
    except asyncio.TimeoutError:
        return False
    return True


class ChannelActor:
    """Holds the keyed queues of one channel; created through ``Channel.create``.

    ``maxsize`` bounds each key's queue separately (0 = unbounded), so a full key back-pressures
    its own producers without stalling other keys.
    """

    def __init__(self, name: str, maxsize: int) -> None:
        self._name = name
        self._maxsize = maxsize
        self._queues: dict[Any, _SubQueue] = {}

    def _queue(self, key: Any) -> _SubQueue:
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _SubQueue()
        return queue

    def _has_room(self, queue: _SubQueue, n: int = 1) -> bool:
        return self._maxsize <= 0 or len(queue.items) + n <= self._maxsize

    async def put(self, envelope: Envelope, key: Any, timeout: float | None) -> str:
        """Append one envelope, waiting up to ``timeout`` for room."""
        queue = self._queue(key)
        async with queue.changed:
            if not await _wait(queue.changed, lambda: self._has_room(queue), timeout):
                return FULL if timeout is not None and timeout <= 0 else TIMEOUT
            queue.items.append(envelope)
            queue.weight += envelope.weight
            queue.changed.notify_all()
        return OK

    async def put_many(self, envelopes: list[Envelope], key: Any, timeout: float | None) -> str:
        """Append several envelopes at once (all or none), waiting up to ``timeout`` for room."""
        queue = self._queue(key)
        n = len(envelopes)
        async with queue.changed:
            if not await _wait(queue.changed, lambda: self._has_room(queue, n), timeout):
                return FULL if timeout is not None and timeout <= 0 else TIMEOUT
            queue.items.extend(envelopes)
            queue.weight += sum(e.weight for e in envelopes)
            queue.changed.notify_all()
        return OK

    def _pop(self, queue: _SubQueue, n: int) -> list[Envelope]:
        out = [queue.items.popleft() for _ in range(n)]
        queue.weight -= sum(e.weight for e in out)
        if not queue.items:
            queue.weight = 0.0  # no float drift on an empty queue
        queue.changed.notify_all()
        return out

    async def get(self, key: Any, timeout: float | None) -> tuple[str, Envelope | None]:
        """Pop the oldest envelope of ``key``, waiting up to ``timeout`` for one."""
        queue = self._queue(key)
        async with queue.changed:
            if not await _wait(queue.changed, lambda: bool(queue.items), timeout):
                return (EMPTY if timeout is not None and timeout <= 0 else TIMEOUT), None
            return OK, self._pop(queue, 1)[0]

    async def get_batch(self, n: int, key: Any, timeout: float | None) -> tuple[str, list]:
        """Pop exactly ``n`` envelopes at once, waiting until ``n`` are queued."""
        queue = self._queue(key)
        async with queue.changed:
            if not await _wait(queue.changed, lambda: len(queue.items) >= n, timeout):
                return (EMPTY if timeout is not None and timeout <= 0 else TIMEOUT), []
            return OK, self._pop(queue, n)

    def _count_for_weight(self, queue: _SubQueue, target: float) -> int:
        total, count = 0.0, 0
        for envelope in queue.items:
            if total >= target:
                break
            total += envelope.weight
            count += 1
        return count

    async def get_batch_by_weight(
        self, target: float, key: Any, timeout: float | None
    ) -> tuple[str, list]:
        """Pop the shortest head of the queue whose weights sum to at least ``target``."""
        queue = self._queue(key)
        async with queue.changed:
            ready = lambda: queue.weight >= target - 1e-9  # noqa: E731
            if not await _wait(queue.changed, ready, timeout):
                return (EMPTY if timeout is not None and timeout <= 0 else TIMEOUT), []
            return OK, self._pop(queue, self._count_for_weight(queue, target))

    async def qsize(self, key: Any) -> int:
        """Number of envelopes queued under ``key``."""
        queue = self._queues.get(key)
        return len(queue.items) if queue else 0

    async def keys(self) -> list:
        """Keys that currently hold at least one item."""
        return [key for key, queue in self._queues.items() if queue.items]

    async def info(self) -> dict[str, Any]:
        """Name, capacity and per-key sizes, for ``repr`` and debugging."""
        sizes = {repr(k): len(q.items) for k, q in self._queues.items() if q.items}
        return {"name": self._name, "maxsize": self._maxsize, "sizes": sizes}
