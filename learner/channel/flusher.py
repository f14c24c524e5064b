"""Sends the coalesced puts of every channel handle in this process within :data:`LINGER_S`.

Why a single thread for the process: a handle that coalesces puts must still deliver a lone put
when its producer goes quiet, so someone has to wake up after a short linger. One daemon thread
with a deadline per handle does that for all handles, instead of a timer thread per put.
Two more rules keep latency low: every blocking read of any channel first sends all pending puts
of the process (a worker that is about to wait should publish what it made, e.g. an env worker
putting observations and then waiting for actions on another channel), and at interpreter exit
pending puts are sent and acknowledged.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import Protocol

logger = logging.getLogger("learner.channel")

LINGER_S = 0.005
"""How long an unsent put may wait for company before the flusher sends it. Shorter costs
throughput: a 1 MB put takes ~1 ms, and each early send is one more actor call."""


class _Flushable(Protocol):
    def send_pending(self) -> None: ...

    def flush(self) -> None: ...


class Flusher:
    """Deadlines of the handles that hold unsent puts, and the thread that honours them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[int, tuple[float, _Flushable]] = {}
        self._thread: threading.Thread | None = None
        self._wake_at = float("inf")  # when the thread wakes up next unless notified

    def schedule(self, handle: _Flushable) -> None:
        """Send ``handle``'s pending puts within :data:`LINGER_S` unless something sends first."""
        with self._cond:
            if id(handle) in self._due:
                return
            deadline = time.monotonic() + LINGER_S
            self._due[id(handle)] = (deadline, handle)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="channel-flusher", daemon=True
                )
                self._thread.start()
            if deadline < self._wake_at:  # waking a thread costs the GIL: only when needed
                self._cond.notify()

    def forget(self, handle: _Flushable) -> None:
        """Drop ``handle``'s deadline (it sent its puts itself, or was closed)."""
        if self._due:
            with self._cond:
                self._due.pop(id(handle), None)

    def send_all(self) -> None:
        """Send every pending put of this process now (called before any read blocks)."""
        if not self._due:  # the common case, checked without the lock
            return
        with self._cond:
            handles = [handle for _, handle in self._due.values()]
            self._due.clear()
        for handle in handles:
            handle.send_pending()

    def _take_expired(self) -> list[_Flushable]:
        """Wait (holding the condition) until a deadline passes; pop the expired handles."""
        while True:
            now = time.monotonic()
            expired = [k for k, (deadline, _) in self._due.items() if deadline <= now]
            if expired:
                self._wake_at = now
                return [self._due.pop(k)[1] for k in expired]
            self._wake_at = min((d for d, _ in self._due.values()), default=float("inf"))
            self._cond.wait(None if self._wake_at == float("inf") else self._wake_at - now)

    def _run(self) -> None:
        while True:
            with self._cond:
                handles = self._take_expired()
            for handle in handles:
                try:
                    handle.send_pending()
                except Exception:
                    logger.exception("channel flusher: sending pending puts failed")

    def flush_at_exit(self) -> None:
        """Send and acknowledge all pending puts; registered with :mod:`atexit`."""
        with self._cond:
            handles = [handle for _, handle in self._due.values()]
            self._due.clear()
        for handle in handles:
            try:
                handle.flush()
            except Exception as err:
                logger.warning("channel: pending puts lost at exit: %s", err)


FLUSHER = Flusher()
atexit.register(FLUSHER.flush_at_exit)
