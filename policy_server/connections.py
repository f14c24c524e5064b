"""Open inference connections and when each last did something: the idle timeout and eviction.

Why: a connection cap protects the server, but a cap alone lets idle or stuck clients (a robot
PC that crashed without closing, a script left open) hold every slot while a working client
gets 503. So each connection records its last request; one silent for ``idle_timeout_s`` is
closed, and when the server is full a new (authenticated) client takes the slot of the
connection idle longest, if that one has been idle at least ``evict_idle_s``.

Why connections that have not sent a request yet are kept apart (*pending*): a client that
completes the handshake and then trickles a frame it never finishes looks idle for
``evict_idle_s``, so the cap's worth of them would lock every working client out for that long,
and for good if they reconnect faster than that. A connection therefore holds its slot only
once it has sent a request; until then it is the first to give way to a newcomer at the cap
(oldest first). A working client sends its first request within milliseconds of the handshake,
so it is pending only briefly; a stalled one can delay nobody. Partial *handshakes* never reach
this table: the websockets library drops them after its opening timeout.

>>> now = [0.0]
>>> table = ConnectionTable(clock=lambda: now[0])
>>> table.add("a"); now[0] = 5.0; table.add("b"); now[0] = 12.0
>>> table.longest_idle(), table.oldest_pending(), table.active
(('a', 12.0), 'a', 0)
>>> table.touch("a"); table.longest_idle(), table.oldest_pending(), table.active
(('b', 7.0), 'b', 1)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable


class ConnectionTable:
    """Last-activity time of every open inference connection (event-loop thread only)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._last: dict[Hashable, float] = {}
        self._pending: dict[Hashable, None] = {}  # no request yet; insertion order = connect order

    def __len__(self) -> int:
        return len(self._last)

    def __contains__(self, conn: Hashable) -> bool:
        return conn in self._last

    @property
    def active(self) -> int:
        """Connections that have sent at least one request."""
        return len(self._last) - len(self._pending)

    def add(self, conn: Hashable) -> None:
        self._last[conn] = self.clock()
        self._pending[conn] = None

    def remove(self, conn: Hashable) -> bool:
        """Forget ``conn``; False if it was not here (already evicted)."""
        self._pending.pop(conn, None)
        return self._last.pop(conn, None) is not None

    def touch(self, conn: Hashable) -> None:
        """``conn`` sent a request (or got a reply): it is active, and idle from now."""
        if conn in self._last:
            self._last[conn] = self.clock()
            self._pending.pop(conn, None)

    def idle_s(self, conn: Hashable) -> float:
        return self.clock() - self._last.get(conn, self.clock())

    def oldest_pending(self) -> Hashable | None:
        """The connection open longest without a request; None when every one has sent one."""
        return next(iter(self._pending), None)

    def longest_idle(self) -> tuple[Hashable, float] | None:
        """(connection, seconds idle) of the connection idle longest; None when empty."""
        if not self._last:
            return None
        conn = min(self._last, key=self._last.__getitem__)
        return conn, self.clock() - self._last[conn]
