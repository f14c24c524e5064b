"""Dynamic batching across client connections, with weight swaps ordered between batches.

Why one queue for requests *and* swaps: the order in which they arrive is the order in which
they take effect. A request queued before a swap is served by the old weights, one queued after
by the new, none is dropped, and no batch ever straddles two versions (the swap is a pointer
change made by this loop while no forward is running).

Batch policy: take the first waiting request, then keep adding requests until ``max_batch``,
until ``max_wait_ms`` after the first one, or until every open client connection has a request
in the batch (waiting longer could not add anyone, so a lone client pays no batching delay).
The wait is also capped at the measured forward time: a request that misses this batch is
served by the next one within about one forward, so waiting longer than that cannot pay off
(for a 0.2 ms MLP a 2 ms wait would only idle the server).
The forward runs in a dedicated thread so the event loop keeps receiving and decoding frames,
except for models measured faster than ``inline_forward_ms``, whose forward runs inline (the
thread hand-off would cost more than it overlaps).

Failures: a policy that raises, or returns something other than ``{"actions": [B, chunk, A]}``,
fails only the requests it could not serve (a failed batch is retried one request at a time),
each with an :class:`InferenceError` saying what was wrong. :meth:`DynamicBatcher.stop` fails
every request it has not answered, the one whose forward is running included, with
:class:`BatcherClosed`: nobody waits on a batcher that is gone.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from policy_server.hotswap import ModelSlot
from policy_server.metrics import ServerMetrics
from policy_server.observations import Canonical, collate, group_by_extras
from rlinf_contracts.wire import clip

log = logging.getLogger(__name__)


class InferenceError(RuntimeError):
    """The policy raised while serving a request (carries the formatted traceback), or broke the
    ``infer`` contract (carries what was wrong)."""


class BatcherClosed(RuntimeError):
    """The server is shutting down; the request was not served."""


@dataclass
class InferResult:
    actions: np.ndarray  # [chunk, A] float32
    weight_version: int
    infer_ms: float
    queue_ms: float
    batch_size: int


@dataclass
class _Request:
    sample: Canonical
    t_recv: float
    future: asyncio.Future = field(repr=False)


@dataclass
class _Swap:
    version: int
    t_ready: float
    future: asyncio.Future = field(repr=False)


class DynamicBatcher:
    """Fuses concurrent requests into forwards of ``slot.active``; applies swaps between them."""

    def __init__(
        self,
        slot: ModelSlot,
        metrics: ServerMetrics,
        max_batch: int,
        max_wait_ms: float,
        open_clients: Callable[[], int],
        thread_init: Callable[[], None] | None = None,
        inline_forward_ms: float = 0.0,
    ) -> None:
        self.slot = slot
        self.metrics = metrics
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self.open_clients = open_clients
        self._items: collections.deque[_Request | _Swap] = collections.deque()
        self._running: list[_Request] = []  # the batch whose forward is under way
        self._wakeup = asyncio.Event()
        # thread_init sets torch's thread count *in* the forward thread: OpenMP settings are
        # per thread, and a fresh thread otherwise gets a default-sized team whose spinning
        # workers cost tens of ms per call on a busy machine (measured: 0.2 -> 75 ms p50).
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="policy-forward", initializer=thread_init
        )
        self._task: asyncio.Task | None = None
        # Forwards measured faster than this run on the loop thread: for a tiny model the two
        # thread hand-offs cost more than the forward itself (measured 0.8 -> 2.3 ms per batch).
        self.inline_forward_ms = inline_forward_ms
        self._forward_ema_ms = float("inf")

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="policy-batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        unanswered = [*self._running, *self._items]
        self._running, self._items = [], collections.deque()
        for item in unanswered:
            if not item.future.done():
                item.future.set_exception(
                    BatcherClosed(
                        "policy server is shutting down; the request was not "
                        "served (reconnect and retry)"
                    )
                )
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def submit(self, sample: Canonical, t_recv: float) -> InferResult:
        """Queue one validated sample; resolves when its batch has run."""
        return await self._enqueue(
            _Request(sample, t_recv, asyncio.get_running_loop().create_future())
        )

    async def swap(self, version: int) -> float:
        """Queue activation of the staged spare as ``version``; returns ms waited for the batch
        gap."""
        t_ready = time.perf_counter()
        await self._enqueue(_Swap(version, t_ready, asyncio.get_running_loop().create_future()))
        return (time.perf_counter() - t_ready) * 1000.0

    async def _enqueue(self, item: _Request | _Swap) -> Any:
        if self._task is None or self._task.done():
            raise BatcherClosed(
                "policy server batcher is not running (shutting down); reconnect and retry"
            )
        self._items.append(item)
        self._wakeup.set()
        return await item.future

    async def _wait_for_item(self, timeout: float | None) -> bool:
        if self._items:
            return True
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        except TimeoutError:
            return False
        return bool(self._items)

    async def _loop(self) -> None:
        while True:
            await self._wait_for_item(None)
            if not self._items:
                continue
            first = self._items.popleft()
            if isinstance(first, _Swap):
                self._apply_swap(first)
                continue
            batch = [first]
            deadline = time.perf_counter() + min(self.max_wait_s, self._forward_ema_ms / 1000.0)
            while len(batch) < self.max_batch:
                if not self._items:
                    remaining = deadline - time.perf_counter()
                    if len(batch) >= self.open_clients() or remaining <= 0:
                        break
                    if not await self._wait_for_item(remaining):
                        break
                if isinstance(self._items[0], _Swap):
                    break  # the swap waits for this batch; later requests see the new version
                batch.append(self._items.popleft())  # type: ignore[arg-type]  # a request: a _Swap at the head broke out above
            self._running = batch
            await self._run(batch)
            self._running = []

    def _apply_swap(self, swap: _Swap) -> None:
        old = self.slot.version
        try:
            self.slot.activate(swap.version)
        except Exception as e:
            swap.future.set_exception(e)
            return
        self.metrics.weight_swaps += 1
        log.info("weight version %d -> %d applied between batches", old, swap.version)
        swap.future.set_result(None)

    def _forward(self, model: Any, samples: list[Canonical]) -> np.ndarray:
        t0 = time.perf_counter()
        parts: list[tuple[list[int], np.ndarray]] = []
        for idx in group_by_extras(samples):  # one forward per extras signature (usually one group)
            parts.append(
                (
                    idx,
                    policy_actions(
                        model, model.infer(collate([samples[i] for i in idx])), len(idx)
                    ),
                )
            )
        ms = (time.perf_counter() - t0) * 1000.0
        self._forward_ema_ms = (
            ms if self._forward_ema_ms == float("inf") else 0.9 * self._forward_ema_ms + 0.1 * ms
        )
        if len(parts) == 1:
            return parts[0][1]
        if len({p.shape[1:] for _, p in parts}) != 1:
            raise InferenceError(
                "policy returned chunks of different shapes per group: "
                f"{[p.shape for _, p in parts]}"
            )
        actions = np.empty((len(samples), *parts[0][1].shape[1:]), np.float32)
        for idx, out in parts:
            actions[idx] = out
        return actions

    async def _run(self, batch: list[_Request]) -> None:
        """Serve ``batch`` (one forward, or one per request when the batch fails)."""
        model, version = self.slot.active, self.slot.version
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        try:
            samples = [r.sample for r in batch]
            if self._forward_ema_ms < self.inline_forward_ms:
                actions = self._forward(model, samples)
            else:
                actions = await loop.run_in_executor(self._executor, self._forward, model, samples)
        except Exception as e:
            if len(batch) > 1:  # find the culprit: others in the batch must not fail with it
                for r in batch:
                    await self._run([r])
                return
            # a broken contract is said in one line; a crash inside the policy keeps its traceback
            msg = (
                str(e) if isinstance(e, InferenceError) else "".join(traceback.format_exception(e))
            )
            log.error("inference failed for a request: %s", clip(str(e) or type(e).__name__, 300))
            if not batch[0].future.done():
                batch[0].future.set_exception(InferenceError(msg))
            return
        infer_ms = (time.perf_counter() - t0) * 1000.0
        self.metrics.observe_batch(len(batch), infer_ms)
        for i, r in enumerate(batch):
            if not r.future.done():  # a client that disconnected cancels its future
                r.future.set_result(
                    InferResult(actions[i], version, infer_ms, (t0 - r.t_recv) * 1000.0, len(batch))
                )


def policy_actions(model: object, out: object, batch: int) -> np.ndarray:
    """The ``[B, chunk, A]`` float32 actions of one ``infer`` result, or an :class:`InferenceError`
    saying how the result breaks the contract ``infer(obs) -> {"actions": [B, chunk, A]}``.

    >>> policy_actions("p", {"actions": np.zeros((2, 3, 1))}, 2).shape
    (2, 3, 1)
    >>> policy_actions("p", {"action": 1}, 2)
    Traceback (most recent call last):
    ...
    policy_server.batching.InferenceError: policy str returned a map with no 'actions' (keys:
    ['action']); ...
    """
    name = type(model).__name__
    want = f"infer must return {{'actions': array [B={batch}, chunk, A]}}"
    if not isinstance(out, Mapping):
        raise InferenceError(f"policy {name} returned {type(out).__name__}, not a map; {want}")
    if "actions" not in out:
        raise InferenceError(
            f"policy {name} returned a map with no 'actions' (keys: {clip(list(out))}); {want}"
        )
    try:
        actions = np.asarray(out["actions"], dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise InferenceError(
            f"policy {name} returned 'actions' that are not a float array ({clip(str(e))}); {want}"
        ) from None
    if actions.ndim != 3 or actions.shape[0] != batch:
        raise InferenceError(
            f"policy {name} returned actions of shape {actions.shape}, expected [B={batch}, "
            "chunk, A]"
        )
    return actions
