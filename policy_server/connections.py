"""Open inference connections and when each last did something: the idle timeout and eviction.

Why: a connection cap protects the server, but a cap alone lets idle or stuck clients (a robot
PC that crashed without closing, a script left open) hold every slot while a working client
gets 503. So each connection records its last request; one silent for ``idle_timeout_s`` is
closed, and when the server is full a new (authenticated) client takes the slot of the
connection idle longest, if that one has been idle at least ``evict_idle_s``.

>>> now = [0.0]
>>> table = ConnectionTable(clock=lambda: now[0])
>>> table.add("a"); now[0] = 5.0; table.add("b"); now[0] = 12.0
>>> table.longest_idle()
('a', 12.0)
>>> table.touch("a"); table.longest_idle()
('b', 7.0)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable


class ConnectionTable:
    """Last-activity time of every open inference connection (event-loop thread only)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._last: dict[Hashable, float] = {}

    def __len__(self) -> int:
        return len(self._last)

    def __contains__(self, conn: Hashable) -> bool:
        return conn in self._last

    def add(self, conn: Hashable) -> None:
        self._last[conn] = self.clock()

    def remove(self, conn: Hashable) -> bool:
        """Forget ``conn``; False if it was not here (already evicted)."""
        return self._last.pop(conn, None) is not None

    def touch(self, conn: Hashable) -> None:
        if conn in self._last:
            self._last[conn] = self.clock()

    def idle_s(self, conn: Hashable) -> float:
        return self.clock() - self._last.get(conn, self.clock())

    def longest_idle(self) -> tuple[Hashable, float] | None:
        """(connection, seconds idle) of the connection idle longest; None when empty."""
        if not self._last:
            return None
        conn = min(self._last, key=self._last.__getitem__)
        return conn, self.clock() - self._last[conn]
