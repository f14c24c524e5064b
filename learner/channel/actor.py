"""The Ray actor behind a :class:`~learner.channel.Channel`: keyed FIFO queues of envelopes.

Why an async actor: a blocked ``get`` (empty queue) or ``put`` (full queue) must not stop other
callers, so every blocking operation awaits an ``asyncio.Condition`` of its key instead of
holding a thread. The actor stores *envelopes* (:mod:`learner.channel.payload`): small items as
opaque pickled bytes, large ones as an object reference the producer made, so consumers fetch
big payloads from the object store directly.

Every method answers with a status string rather than raising, because exceptions crossing Ray
are slow and arrive wrapped; the client turns statuses into ``ChannelFull`` / ``ChannelEmpty``
/ ``ChannelTimeout`` with the channel name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from learner.channel.payload import Envelope

logger = logging.getLogger("learner.channel")

OK, FULL, EMPTY, TIMEOUT = "ok", "full", "empty", "timeout"
ORDER_WAIT_S = 60.0
"""How long a pipelined put waits for its predecessor before going ahead (and warning)."""

Ticket = tuple[str, int]
"""``(producer id, sequence number)`` of a pipelined put; sequence numbers start at 1."""


@dataclass
class _SubQueue:
    """The FIFO of one key, with its running weight and one condition for all waiters."""

    items: deque[Envelope] = field(default_factory=deque)
    weight: float = 0.0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    users: int = 0  # calls holding or waiting on ``changed``; an idle empty queue is dropped


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
    except TimeoutError:
        return False
    return True


class ChannelActor:
    """Holds the keyed queues of one channel; created through ``Channel.create``.

    ``maxsize`` bounds each key's queue separately (0 = unbounded), so a full key back-pressures
    its own producers without stalling other keys.
    """

    def __init__(self, name: str, maxsize: int, prefetch: int = 1) -> None:
        self._name = name
        self._maxsize = maxsize
        self._prefetch = prefetch  # handles made by ``Channel.connect`` adopt it
        self._queues: dict[Any, _SubQueue] = {}
        # Ray may start an async actor's calls out of submission order, so pipelined puts carry
        # a ticket and are applied in ticket order per producer; reads may name the last ticket
        # of their own handle so that they see its puts ("read your writes").
        self._applied: dict[str, int] = {}
        self._order = asyncio.Condition()

    async def _turn(self, ticket: Ticket | None, ahead: int) -> None:
        """Wait until the producer of ``ticket`` has applied ``ticket[1] - ahead`` puts."""
        if ticket is None:
            return
        producer, seq = ticket
        ready = lambda: self._applied.get(producer, 0) >= seq - ahead  # noqa: E731
        async with self._order:
            if not await _wait(self._order, ready, ORDER_WAIT_S):
                logger.warning(
                    "channel %r: put %d of producer %s arrived but its predecessor did not "
                    "within %.0f s; going ahead",
                    self._name,
                    seq,
                    producer,
                    ORDER_WAIT_S,
                )

    async def _applied_turn(self, ticket: Ticket | None) -> None:
        if ticket is None:
            return
        producer, seq = ticket
        async with self._order:
            self._applied[producer] = max(self._applied.get(producer, 0), seq)
            self._order.notify_all()

    @contextlib.asynccontextmanager
    async def _locked(self, key: Any) -> AsyncIterator[_SubQueue]:
        """The queue of ``key`` with its lock held; dropped afterwards if empty and unused, so
        short-lived keys (one per episode, say) do not pile up."""
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _SubQueue()
        queue.users += 1
        try:
            async with queue.changed:
                yield queue
        finally:
            queue.users -= 1
            if not queue.users and not queue.items and self._queues.get(key) is queue:
                del self._queues[key]

    def _has_room(self, queue: _SubQueue, n: int = 1) -> bool:
        return self._maxsize <= 0 or len(queue.items) + n <= self._maxsize

    async def put(
        self,
        envelopes: list[Envelope],
        key: Any,
        timeout: float | None,
        ticket: Ticket | None = None,
    ) -> str:
        """Append ``envelopes`` (all or none), waiting up to ``timeout`` for room.

        With a ``ticket`` the put is first held back until the producer's previous one landed.
        """
        await self._turn(ticket, ahead=1)
        try:
            return await self._append(envelopes, key, timeout)
        finally:
            await self._applied_turn(ticket)

    async def _append(self, envelopes: list[Envelope], key: Any, timeout: float | None) -> str:
        n = len(envelopes)
        async with self._locked(key) as queue:
            if not await _wait(queue.changed, lambda: self._has_room(queue, n), timeout):
                return FULL if timeout is not None and timeout <= 0 else TIMEOUT
            queue.items.extend(envelopes)
            queue.weight += sum(w for _, w in envelopes)
            queue.changed.notify_all()
        return OK

    async def put_batches(self, batches: list[tuple[Any, list[Envelope]]], ticket: Ticket) -> str:
        """Append the coalesced puts of one handle (unbounded channels only, so nothing waits).

        ``batches`` are ``(key, envelopes)`` runs in the order the handle made them.
        """
        await self._turn(ticket, ahead=1)
        try:
            for key, envelopes in batches:
                await self._append(envelopes, key, None)
        finally:
            await self._applied_turn(ticket)
        return OK

    async def take(
        self,
        min_n: int,
        max_n: int,
        max_bytes: int,
        key: Any,
        timeout: float | None,
        after: Ticket | None = None,
        puts: list[tuple[Any, list[Envelope]]] | None = None,
    ) -> tuple[str, list]:
        """Pop between ``min_n`` and ``max_n`` envelopes, waiting until ``min_n`` are queued.

        Beyond ``min_n`` it stops before inline bytes would pass ``max_bytes`` (the consumer's
        prefetch). ``puts`` are the caller's own unsent puts, ticket ``after``: applying them in
        the same call saves the caller a second round trip.
        """
        if puts:
            await self.put_batches(puts, after)
        else:
            await self._turn(after, ahead=0)
        async with self._locked(key) as queue:
            if not await _wait(queue.changed, lambda: len(queue.items) >= min_n, timeout):
                return (EMPTY if timeout is not None and timeout <= 0 else TIMEOUT), []
            return OK, self._pop(queue, self._count_for_bytes(queue, min_n, max_n, max_bytes))

    @staticmethod
    def _count_for_bytes(queue: _SubQueue, min_n: int, max_n: int, max_bytes: int) -> int:
        count, total = 0, 0
        for payload, _ in queue.items:
            size = len(payload) if isinstance(payload, bytes) else 0  # a reference: no bytes here
            if count >= max_n or (count >= min_n and total + size > max_bytes):
                break
            total += size
            count += 1
        return count

    async def requeue(self, envelopes: list[Envelope], key: Any) -> str:
        """Put back items a dropped handle had prefetched, at the head: they are the oldest."""
        async with self._locked(key) as queue:
            queue.items.extendleft(reversed(envelopes))
            queue.weight += sum(w for _, w in envelopes)
            queue.changed.notify_all()
        return OK

    def _pop(self, queue: _SubQueue, n: int) -> list[Envelope]:
        out = [queue.items.popleft() for _ in range(n)]
        queue.weight -= sum(w for _, w in out)
        if not queue.items:
            queue.weight = 0.0  # no float drift on an empty queue
        queue.changed.notify_all()
        return out

    async def get_batch(
        self, n: int, key: Any, timeout: float | None, after: Ticket | None = None
    ) -> tuple[str, list]:
        """Pop exactly ``n`` envelopes at once, waiting until ``n`` are queued.

        ``after`` names the caller's own last put, which must land first.
        """
        await self._turn(after, ahead=0)
        async with self._locked(key) as queue:
            if not await _wait(queue.changed, lambda: len(queue.items) >= n, timeout):
                return (EMPTY if timeout is not None and timeout <= 0 else TIMEOUT), []
            return OK, self._pop(queue, n)

    def _count_for_weight(self, queue: _SubQueue, target: float) -> int:
        total, count = 0.0, 0
        for _, weight in queue.items:
            if total >= target:
                break
            total += weight
            count += 1
        return count

    async def get_batch_by_weight(
        self, target: float, key: Any, timeout: float | None, after: Ticket | None = None
    ) -> tuple[str, list]:
        """Pop the shortest head of the queue whose weights sum to at least ``target``."""
        await self._turn(after, ahead=0)
        async with self._locked(key) as queue:
            ready = lambda: queue.weight >= target - 1e-9  # noqa: E731
            if not await _wait(queue.changed, ready, timeout):
                return (EMPTY if timeout is not None and timeout <= 0 else TIMEOUT), []
            return OK, self._pop(queue, self._count_for_weight(queue, target))

    async def qsize(self, key: Any, after: Ticket | None = None) -> int:
        """Number of envelopes queued under ``key``."""
        await self._turn(after, ahead=0)
        queue = self._queues.get(key)
        return len(queue.items) if queue else 0

    async def keys(self, after: Ticket | None = None) -> list:
        """Keys that currently hold at least one item."""
        await self._turn(after, ahead=0)
        return [key for key, queue in self._queues.items() if queue.items]

    async def info(self) -> dict[str, Any]:
        """Name, capacity and per-key sizes, for ``repr`` and debugging."""
        sizes = {repr(k): len(q.items) for k, q in self._queues.items() if q.items}
        return {
            "name": self._name,
            "maxsize": self._maxsize,
            "prefetch": self._prefetch,
            "sizes": sizes,
            "queues_held": len(self._queues),  # includes empty queues that callers wait on
        }
