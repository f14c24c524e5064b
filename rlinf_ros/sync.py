"""Approximate-time synchronisation of several streams (message_filters is not on PyPI).

Why our own, and why this policy: a controller wants the *newest* set of messages whose stamps
lie within ``slop`` seconds of each other, not every matched set. :class:`ApproxTimeSync` keeps
a short per-stream queue and returns the newest such set (searching from the newest message of
the stream that updates least often), then drops everything older than it, so a
set is never returned twice.

>>> s = ApproxTimeSync(["joints", "cam"], slop=0.02)
>>> s.add("joints", 1.000, "j0"); s.add("cam", 1.015, "c0"); s.add("joints", 1.100, "j1")
>>> s.pop_newest()
{'joints': (1.0, 'j0'), 'cam': (1.015, 'c0')}
>>> s.pop_newest() is None        # j1 has no camera partner yet
True
"""

from __future__ import annotations

import collections
import threading
from typing import Any


class ApproxTimeSync:
    """Thread-safe: subscriptions ``add`` from callbacks, the control loop ``pop_newest``."""

    def __init__(self, streams: list[str], slop: float, queue_size: int = 10) -> None:
        if not streams:
            raise ValueError("ApproxTimeSync needs at least one stream")
        if slop < 0:
            raise ValueError(f"slop must be >= 0 seconds, got {slop}")
        self.streams = list(streams)
        self.slop = slop
        self._q: dict[str, collections.deque[tuple[float, Any]]] = {
            s: collections.deque(maxlen=queue_size) for s in streams
        }
        self._lock = threading.Lock()
        self.last: dict[str, tuple[float, Any]] | None = None  # the newest set handed out

    def add(self, stream: str, stamp: float, msg: Any) -> None:
        if stream not in self._q:
            raise KeyError(f"unknown stream {stream!r}; known: {self.streams}")
        with self._lock:
            q = self._q[stream]
            if q and stamp < q[-1][0]:  # out of order: keep queue sorted
                items = sorted([*q, (stamp, msg)], key=lambda x: x[0])
                q.clear()
                q.extend(items)
            else:
                q.append((stamp, msg))

    def _match(self, pivot: float) -> dict[str, tuple[float, Any]] | None:
        out = {}
        for s, q in self._q.items():
            best = min(q, key=lambda x: abs(x[0] - pivot), default=None)
            if best is None or abs(best[0] - pivot) > self.slop:
                return None
            out[s] = best
        stamps = [v[0] for v in out.values()]
        return out if max(stamps) - min(stamps) <= self.slop else None

    def pop_newest(self) -> dict[str, tuple[float, Any]] | None:
        """The newest matched set ``{stream: (stamp, msg)}``, or None; consumed sets are dropped."""
        with self._lock:
            if any(not q for q in self._q.values()):
                return None
            # pivot candidates: messages of the stream whose newest message is oldest
            slowest = min(self._q, key=lambda s: self._q[s][-1][0])
            for stamp, _ in reversed(self._q[slowest]):
                found = self._match(stamp)
                if found is not None:
                    for s, q in self._q.items():
                        t = found[s][0]
                        while q and q[0][0] <= t:
                            q.popleft()
                    self.last = found
                    return found
            return None

    def latest_stamps(self) -> dict[str, float | None]:
        with self._lock:
            return {s: (q[-1][0] if q else None) for s, q in self._q.items()}
