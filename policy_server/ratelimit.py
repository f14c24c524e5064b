"""Rate-limited logging: a flood of bad frames or failed reconnects must not flood the log.

Why: every malformed frame, refused connection and failed retry is worth one log line, but a
client sending 10,000 bad frames a second (or a robot retrying for an hour) would otherwise
write 10,000 lines a second. Each *kind* of event may log ``burst`` lines per ``period_s``; the
rest are counted, and the next line that gets through says how many were suppressed.

>>> limiter = RateLimiter(burst=2, period_s=60.0, clock=lambda: 0.0)
>>> [limiter.allow("bad_request") for _ in range(4)]
[(True, 0), (True, 0), (False, 0), (False, 0)]
>>> limiter.clock = lambda: 61.0
>>> limiter.allow("bad_request")
(True, 2)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any


class RateLimiter:
    """At most ``burst`` events of one kind per ``period_s`` window; counts the rest."""

    def __init__(
        self, burst: int = 5, period_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst, self.period_s, self.clock = burst, period_s, clock
        self._windows: dict[str, tuple[float, int]] = {}  # kind -> (window start, events in it)
        self._suppressed: dict[str, int] = {}

    def allow(self, kind: str) -> tuple[bool, int]:
        """(may this event be logged, how many of its kind were suppressed before it)."""
        now = self.clock()
        start, n = self._windows.get(kind, (now, 0))
        if now - start >= self.period_s:
            start, n = now, 0
        self._windows[kind] = (start, n + 1)
        if n < self.burst:
            return True, self._suppressed.pop(kind, 0)
        self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
        return False, 0


class RateLimitedLog:
    """``log.warning(kind, fmt, *args)``: a :class:`logging.Logger` behind a
    :class:`RateLimiter`."""

    def __init__(self, logger: logging.Logger, burst: int = 5, period_s: float = 10.0) -> None:
        self.logger = logger
        self.limiter = RateLimiter(burst, period_s)

    def log(self, level: int, kind: str, fmt: str, *args: Any, exc_info: bool = False) -> None:
        allowed, suppressed = self.limiter.allow(kind)
        if not allowed:
            return
        if suppressed:
            fmt += f" ({suppressed} similar messages suppressed)"
        self.logger.log(level, fmt, *args, exc_info=exc_info)

    def info(self, kind: str, fmt: str, *args: Any) -> None:
        self.log(logging.INFO, kind, fmt, *args)

    def warning(self, kind: str, fmt: str, *args: Any) -> None:
        self.log(logging.WARNING, kind, fmt, *args)
