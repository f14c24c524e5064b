"""``Channel``: a named FIFO between worker groups, with per-key sub-queues and back-pressure.

A channel is a small async Ray actor (:mod:`learner.channel.actor`) plus this handle. The handle
is picklable: create it on the driver, pass it to workers as an argument, or ``connect`` by name.
Items up to :data:`~learner.channel.payload.INLINE_LIMIT` array bytes ride inside the actor call
as one pickled blob; bigger ones are ``ray.put`` by the producer and only the reference goes
through the actor, so payload bytes are written once into the object store and read zero-copy
by the consumer (CPU tensors included, see :mod:`learner.channel.payload`). Such a large item
is owned by its producer's process: once that process has exited, an unconsumed item may be
lost (Ray serves it while its bytes remain reachable), and the ``get`` that pops a lost item
raises :class:`ChannelError` saying so.

With Ray initialised (``learner.cluster.Cluster.local()``):

>>> ch = Channel.create("doc-rollouts", maxsize=4)
>>> ch.put({"obs": [0.5, 1.5]}, key="env0")
>>> ch.put({"obs": [2.5, 3.5]}, key="env0")
>>> ch.get_batch(2, key="env0", timeout=30)
[{'obs': [0.5, 1.5]}, {'obs': [2.5, 3.5]}]
>>> ch.close()

Semantics follow ``asyncio.Queue``: ``maxsize`` bounds each key's queue (0 = unbounded); ``put``
blocks while that queue is full, ``get`` while it is empty. ``timeout=None`` waits for ever with
a periodic warning naming the channel; a finite timeout raises :class:`ChannelTimeout`.

Speed: one actor call costs about a raw 1 KB ``ray.put`` + ``ray.get``, so the handle avoids
calls per item (measured in ``benchmarks/results/channel.md``):

* *Coalesced puts* (unbounded channels; a put there can never block): a ``put`` joins this
  handle's unsent puts (:mod:`learner.channel.buffers`), sent in one call once 64 items or 1 MB
  of inline bytes wait, after :data:`~learner.channel.flusher.LINGER_S` at the latest, when this
  handle reads (the read carries them in the same call), or when *any* handle of the process is
  about to block on a read. Each send carries a ticket ``(handle id, sequence)`` and the actor
  applies one handle's sends in ticket order (Ray may start an async actor's calls out of
  order), so a handle's puts keep their order and its own reads always see them; other
  handles see them within the linger. :meth:`Channel.flush` sends and waits for all. Bounded
  channels acknowledge every put (that is the back-pressure).
* *Bundles* (unbounded channels): the large items (up to 4 MB) of one coalesced send are copied
  at put time and written to the object store as one object when the send goes
  (:mod:`learner.channel.bundle`): one ``ray.put`` and one reference per send instead of per
  item, which took the 1 MB stream from ~0.6x to above raw ``ray.put``/``ray.get``. An item read
  from a bundle is a view of it, so the bundle stays in the store while any of its items lives.
* *Prefetch*: a ``get`` that has to call the actor takes up to ``prefetch`` ready items of the
  key (:data:`PREFETCH_BYTES` of inline bytes) and keeps the extra ones in this handle for its
  next gets, in FIFO order. Trade-off: an item prefetched by one handle is invisible to every
  other handle (their ``qsize`` / ``get`` see only the actor's queue) until that handle gets
  them or is garbage-collected (it then gives them back, at the head of the queue), so when
  several consumers share one key, create the channel with ``prefetch=1``. The default is
  :data:`~learner.channel.buffers.DEFAULT_PREFETCH` on unbounded channels, where the runners
  have one consumer per key, and 1 (off) on bounded ones, whose bound would otherwise loosen.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import deque
from typing import Any

import ray

from learner.channel.actor import OK, ChannelActor, Ticket
from learner.channel.buffers import (
    DEFAULT_PREFETCH,  # noqa: F401 - re-exported
    Batches,
    PendingPuts,
    ReadBuffer,
    resolve_prefetch,
)
from learner.channel.bundle import BundleCache
from learner.channel.errors import ChannelError, ChannelTimeout
from learner.channel.flusher import FLUSHER
from learner.channel.payload import Envelope, aopen_all, bundle_batches, open_all, seal
from learner.channel.waiting import await_answer, raise_status, wait

DEFAULT_KEY = "__default__"
PUT_WINDOW = 64
"""Unacknowledged put calls one handle may have in flight on an unbounded channel."""
PREFETCH_BYTES = 2 << 20
"""Beyond the first item, a prefetching ``get`` stops before this many inline bytes."""
_RemoteActor = ray.remote(ChannelActor)


def _key(key: Any) -> Any:
    return DEFAULT_KEY if key is None else key


class Channel:
    """Handle to a named channel; cheap to pickle and pass to workers (see module doc)."""

    def __init__(
        self,
        name: str,
        actor: Any,
        maxsize: int,
        namespace: str | None,
        prefetch: int | None = None,
    ) -> None:
        self.name = name
        self.maxsize = maxsize
        self.namespace = namespace
        self.prefetch = resolve_prefetch(name, prefetch, maxsize)
        self._actor = actor
        self._inflight: deque[tuple[Any, str]] = deque()
        self._producer = uuid.uuid4().hex  # every copy of a handle is its own producer
        self._seq = itertools.count(1)
        self._last_seq = 0
        self._lock = threading.Lock()  # guards the two buffers and the ticket counter
        self._pending = PendingPuts()
        self._ready = ReadBuffer()
        self._bundles = BundleCache()  # the last bundle this handle read from

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        name: str,
        maxsize: int = 0,
        namespace: str | None = None,
        prefetch: int | None = None,
    ) -> Channel:
        """Start the channel actor ``name`` (0 CPUs, so it takes no slot); the name must be new.

        ``prefetch``: items one ``get`` may fetch ahead for later gets of the same key (default
        :data:`DEFAULT_PREFETCH` unbounded, 1 = off bounded); ``connect`` adopts it. Set 1 when
        several consumers share a key (see module doc). The actor lives as long as the process
        that created it. Ray must be initialised (``Cluster.local()`` or ``Cluster.connect()``).
        """
        if not name or not isinstance(name, str):
            raise ValueError(f"channel name must be a non-empty string, got {name!r}")
        if maxsize < 0:
            raise ValueError(f"channel {name!r}: maxsize must be >= 0 (0: no bound), got {maxsize}")
        prefetch = resolve_prefetch(name, prefetch, maxsize)
        if not ray.is_initialized():
            raise ChannelError(
                f"channel {name!r}: Ray is not initialised; start it with "
                "learner.cluster.Cluster.local() first"
            )
        options = dict(name=f"channel:{name}", namespace=namespace, num_cpus=0)
        try:
            actor = _RemoteActor.options(**options, max_concurrency=10_000).remote(
                name, maxsize, prefetch
            )
        except ValueError as err:  # Ray: "The name ... is already taken"
            raise ValueError(
                f"channel {name!r} already exists; use Channel.connect({name!r}) to join it"
            ) from err
        channel = cls(name, actor, maxsize, namespace, prefetch)
        channel.qsize()  # wait until the actor is up so start-up errors surface here
        return channel

    @classmethod
    def connect(
        cls,
        name: str,
        namespace: str | None = None,
        timeout: float = 30.0,
        prefetch: int | None = None,
    ) -> Channel:
        """Join an existing channel by name, waiting up to ``timeout`` s for it to be created.

        ``prefetch`` overrides the channel's setting for this handle only.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                actor = ray.get_actor(f"channel:{name}", namespace=namespace)
                break
            except ValueError:
                if time.monotonic() >= deadline:
                    raise ChannelTimeout(
                        f"channel {name!r} does not exist (waited {timeout:.0f} s); create it "
                        "with Channel.create or check the name and Ray namespace"
                    ) from None
                time.sleep(0.1)
        info = wait(name, actor.info.remote(), "connect", timeout)
        chosen = info.get("prefetch") if prefetch is None else prefetch
        return cls(name, actor, info["maxsize"], namespace, chosen)

    def send_pending(self) -> None:
        """Hand this handle's coalesced puts to Ray now, without waiting for the answer."""
        with self._lock:
            batches, ticket = self._take_pending()
            if batches:
                ref = self._actor.put_batches.remote(batches, ticket)
                self._inflight.append((ref, f"put(key={batches[-1][0]!r})"))
        if batches:
            FLUSHER.forget(self)
            self._trim_window(PUT_WINDOW)

    def flush(self) -> None:
        """Wait until every put of this handle has reached the channel actor."""
        self.send_pending()
        self._trim_window(0)

    def close(self) -> None:
        """Destroy the channel actor; queued items are dropped and other handles stop working."""
        with self._lock:
            self._pending.drain()
        FLUSHER.forget(self)
        self._inflight.clear()
        ray.kill(self._actor)

    def __del__(self) -> None:
        """Give prefetched items back to the actor, so dropping a handle loses no item."""
        try:
            for key in self._ready.keys():
                items = self._ready.pop_upto(key, self._ready.count(key))
                self._actor.requeue.remote(items, key)
        except Exception:
            pass

    def __reduce__(self) -> tuple:
        return (Channel, (self.name, self._actor, self.maxsize, self.namespace, self.prefetch))

    def __repr__(self) -> str:
        return f"Channel({self.name!r}, maxsize={self.maxsize}, prefetch={self.prefetch})"

    # -- helpers ---------------------------------------------------------------------------
    def _check(self, status: str, what: str, timeout: float | None) -> None:
        if status != OK:
            raise_status(self.name, status, what, timeout, self.maxsize)

    def _call(self, ref: Any, what: str, timeout: float | None) -> Any:
        """Wait for a call whose answer is ``(status, payload)`` and return the payload."""
        status, payload = wait(self.name, ref, what, timeout)
        self._check(status, what, timeout)
        return payload

    def _trim_window(self, limit: int) -> None:
        """Wait for the oldest in-flight puts until at most ``limit`` remain."""
        while len(self._inflight) > limit:
            try:
                old, old_what = self._inflight.popleft()
            except IndexError:  # another thread took the last one
                return
            self._check(wait(self.name, old, old_what, None), old_what, None)

    def _after(self) -> Ticket | None:
        """Ticket of this handle's last pipelined put, which a read of this handle must see."""
        return (self._producer, self._last_seq) if self._last_seq else None

    def _take_pending(self) -> tuple[Batches, Ticket | None]:
        """Drain the unsent puts (caller holds the lock) and give them the next ticket."""
        if not len(self._pending):
            return [], self._after()
        self._last_seq = next(self._seq)
        return bundle_batches(self._pending.drain()), (self._producer, self._last_seq)

    def _put(self, envelopes: list[Envelope], key: Any, timeout: float | None, what: str) -> None:
        """Bounded: wait for the answer (back-pressure). Unbounded: coalesce, send later."""
        if self.maxsize:
            ref = self._actor.put.remote(envelopes, _key(key), timeout)
            self._check(wait(self.name, ref, what, timeout), what, timeout)
            return
        with self._lock:
            send_now = self._pending.add(_key(key), envelopes)
        if send_now:
            self.send_pending()
        else:
            FLUSHER.schedule(self)

    def _take(self, min_n: int, max_n: int, max_bytes: int, key: Any, timeout: float | None):
        """Submit a ``take`` carrying this handle's unsent puts; other handles' puts go too."""
        with self._lock:
            puts, after = self._take_pending()
            ref = self._actor.take.remote(min_n, max_n, max_bytes, key, timeout, after, puts)
        if puts:
            FLUSHER.forget(self)
        FLUSHER.send_all()  # this process is about to wait: publish what it made
        return ref

    def _read_ref(self, method: str, *args: Any) -> Any:
        """Submit a read that must see this handle's puts, which are sent first."""
        self.send_pending()
        FLUSHER.send_all()
        return getattr(self._actor, method).remote(*args, self._after())

    def _keep(self, key: Any, envelopes: list[Envelope]) -> Envelope:
        """Buffer all but the first of a prefetching fetch; return the first."""
        if len(envelopes) > 1:
            with self._lock:
                self._ready.push_back(key, envelopes[1:])
        return envelopes[0]

    def _check_batch(self, n: int) -> None:
        if n < 1 or (self.maxsize and n > self.maxsize):
            bound = f" <= maxsize={self.maxsize}" if self.maxsize else ""
            raise ValueError(f"channel {self.name!r}: get_batch(n={n}) needs 1 <= n{bound}")

    # -- producer side ---------------------------------------------------------------------
    def put(
        self, item: Any, key: Any = None, weight: float = 1.0, timeout: float | None = None
    ) -> None:
        """Append ``item`` under ``key``; blocks while that key's queue is full."""
        self._put([seal(item, weight, bundle=not self.maxsize)], key, timeout, f"put(key={key!r})")

    def put_nowait(self, item: Any, key: Any = None, weight: float = 1.0) -> None:
        """Append ``item`` or raise :class:`ChannelFull` at once (never, if unbounded)."""
        what = f"put_nowait(key={key!r})"
        if not self.maxsize:
            self._put([seal(item, weight, bundle=True)], key, None, what)
            return
        ref = self._actor.put.remote([seal(item, weight)], _key(key), 0.0)
        self._check(wait(self.name, ref, what, 0.0), what, 0.0)

    def put_many(
        self,
        items: list[Any],
        key: Any = None,
        weights: list[float] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Append several items in one actor call (all or none): the cheap path for small items."""
        if weights is None:
            weights = [1.0] * len(items)
        if len(weights) != len(items):
            raise ValueError(
                f"channel {self.name!r}: put_many got {len(items)} items, {len(weights)} weights"
            )
        if self.maxsize and len(items) > self.maxsize:
            raise ValueError(
                f"channel {self.name!r}: put_many of {len(items)} items can never fit "
                f"maxsize={self.maxsize}; split the list"
            )
        envelopes = [seal(x, w, bundle=not self.maxsize) for x, w in zip(items, weights)]
        self._put(envelopes, key, timeout, f"put_many(key={key!r})")

    # -- consumer side ---------------------------------------------------------------------
    def get(self, key: Any = None, timeout: float | None = None) -> Any:
        """Pop the oldest item of ``key``; blocks while that queue is empty."""
        return self._get_one(key, timeout, f"get(key={key!r})")

    def get_nowait(self, key: Any = None) -> Any:
        """Pop the oldest item of ``key`` or raise :class:`ChannelEmpty` at once."""
        return self._get_one(key, 0.0, f"get_nowait(key={key!r})")

    def _get_one(self, key: Any, timeout: float | None, what: str) -> Any:
        k = _key(key)
        with self._lock:
            envelope = self._ready.pop(k)
        if envelope is None:
            ref = self._take(1, self.prefetch, PREFETCH_BYTES, k, timeout)
            envelope = self._keep(k, self._call(ref, what, timeout))
        return open_all(self.name, [envelope], self._bundles)[0]

    def get_batch(self, n: int, key: Any = None, timeout: float | None = None) -> list[Any]:
        """Pop exactly ``n`` items of ``key`` (oldest first) once ``n`` are queued."""
        self._check_batch(n)
        k = _key(key)
        with self._lock:
            head = self._ready.pop_upto(k, n)
        try:
            if len(head) < n:
                ref = self._take(n - len(head), n - len(head), 0, k, timeout)
                head += self._call(ref, f"get_batch(n={n}, key={key!r})", timeout)
        except BaseException:
            with self._lock:
                self._ready.push_front(k, head)  # a batch that failed takes nothing
            raise
        return open_all(self.name, head, self._bundles)

    def get_batch_by_weight(
        self, target: float, key: Any = None, timeout: float | None = None
    ) -> list[Any]:
        """Pop the oldest items of ``key`` whose weights first reach ``target``."""
        if target <= 0:
            raise ValueError(
                f"channel {self.name!r}: get_batch_by_weight target must be > 0, got {target}"
            )
        k = _key(key)
        with self._lock:
            head, have = self._ready.pop_weight(k, target)
        try:
            if have < target - 1e-9:
                ref = self._read_ref("get_batch_by_weight", float(target - have), k, timeout)
                what = f"get_batch_by_weight(target={target}, key={key!r})"
                head += self._call(ref, what, timeout)
        except BaseException:
            with self._lock:
                self._ready.push_front(k, head)
            raise
        return open_all(self.name, head, self._bundles)

    # -- queries ---------------------------------------------------------------------------
    def qsize(self, key: Any = None) -> int:
        """Items this handle could get from ``key`` now: the actor's queue (this handle's puts
        included) plus items this handle already prefetched (invisible to other handles)."""
        k = _key(key)
        ref = self._read_ref("qsize", k)
        return wait(self.name, ref, f"qsize(key={key!r})", 0.0) + self._ready.count(k)

    def empty(self, key: Any = None) -> bool:
        """True when ``key``'s queue holds nothing (for this handle, see :meth:`qsize`)."""
        return self.qsize(key) == 0

    def full(self, key: Any = None) -> bool:
        """True when ``key``'s queue is at ``maxsize`` (never for an unbounded channel)."""
        return bool(self.maxsize) and self.qsize(key) >= self.maxsize

    def keys(self) -> list[Any]:
        """Keys currently holding items (the default key appears as ``DEFAULT_KEY``)."""
        found = wait(self.name, self._read_ref("keys"), "keys()", 0.0)
        return found + [k for k in self._ready.keys() if k not in found]

    # -- asyncio ---------------------------------------------------------------------------
    async def aput(
        self, item: Any, key: Any = None, weight: float = 1.0, timeout: float | None = None
    ) -> None:
        """``put`` for async workers: awaits the actor's answer without blocking the loop."""
        what = f"aput(key={key!r})"
        envelopes = [seal(item, weight)]
        if self.maxsize:
            ref = self._actor.put.remote(envelopes, _key(key), timeout)
        else:
            with self._lock:
                self._pending.add(_key(key), envelopes)
                batches, ticket = self._take_pending()
                ref = self._actor.put_batches.remote(batches, ticket)
            FLUSHER.forget(self)
        self._check(await await_answer(self.name, ref, what, timeout), what, timeout)

    async def aget(self, key: Any = None, timeout: float | None = None) -> Any:
        """``get`` for async workers."""
        k = _key(key)
        with self._lock:
            envelope = self._ready.pop(k)
        if envelope is None:
            what = f"aget(key={key!r})"
            ref = self._take(1, self.prefetch, PREFETCH_BYTES, k, timeout)
            status, envelopes = await await_answer(self.name, ref, what, timeout)
            self._check(status, what, timeout)
            envelope = self._keep(k, envelopes)
        return (await aopen_all(self.name, [envelope], self._bundles))[0]

    async def aget_batch(self, n: int, key: Any = None, timeout: float | None = None) -> list[Any]:
        """``get_batch`` for async workers."""
        self._check_batch(n)
        k = _key(key)
        with self._lock:
            head = self._ready.pop_upto(k, n)
        try:
            if len(head) < n:
                what = f"aget_batch(n={n}, key={key!r})"
                ref = self._take(n - len(head), n - len(head), 0, k, timeout)
                status, envelopes = await await_answer(self.name, ref, what, timeout)
                self._check(status, what, timeout)
                head += envelopes
        except BaseException:
            with self._lock:
                self._ready.push_front(k, head)
            raise
        return await aopen_all(self.name, head, self._bundles)
