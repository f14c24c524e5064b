"""Log a repeating event once, then one summary line per interval: :class:`EventSummary`.

Why: a robot's nominal run repeats a few harmless events many times a minute -- a velocity
clamp on every fast command, the policy loop holding for each chunk's round trip. One line per
event buried the lines that matter (most of a robot graph's log was such repeats); dropping them
would hide a new kind of trouble. So an event whose kind was not seen for ``interval_s`` is
logged at once, in full; its repeats are counted and summarised at most once per
``interval_s`` in one line for all kinds (``safety: 12 velocity clamps, 3 workspace clamps in
the last 30 s``).

The summary is written when an event or a :meth:`EventSummary.poll` comes after the window
closed (callers with a periodic tick poll there) and by :meth:`EventSummary.flush` at the end,
so a burst that stopped is still reported. The clock is injected: the rate limit is exact under
a fake clock.

>>> lines, now = [], [0.0]
>>> s = EventSummary("safety", 30.0, clock=lambda: now[0], emit=lines.append)
>>> s.note("clamp", "safety clamp: joint 3 too fast")
True
>>> now[0] = 1.0; s.note("clamp", "safety clamp: joint 3 too fast")
False
>>> now[0] = 31.0; s.poll(); lines
['safety clamp: joint 3 too fast', 'safety: 1 clamp in the last 30 s']
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field


def count_phrase(kind: str, n: int) -> str:
    """``3 clamp`` -> the default wording of one kind's count in a summary: ``3 clamp``."""
    return f"{n} {kind}"


@dataclass
class EventSummary:
    """Counts events by kind; see the module docstring. ``describe(kind, n)`` words one kind's
    count in the summary line (e.g. ``12 velocity clamps``); ``emit`` takes a finished line
    (default: ``logger.log(level, line)``)."""

    name: str
    interval_s: float = 30.0
    clock: Callable[[], float] = time.monotonic
    emit: Callable[[str], None] | None = None
    describe: Callable[[str, int], str] = count_phrase
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger(__name__))
    level: int = logging.INFO
    pending: Counter[str] = field(default_factory=Counter)  # repeats not yet summarised
    total: Counter[str] = field(default_factory=Counter)  # every event, by kind
    _last_seen: dict[str, float] = field(default_factory=dict)
    _window_start: float | None = None

    def note(self, kind: str, message: str) -> bool:
        """Count one event; returns whether ``message`` was logged now (a kind not seen for
        ``interval_s``) rather than counted for the next summary."""
        now = self.clock()
        self._roll(now)
        self.total[kind] += 1
        last = self._last_seen.get(kind)
        self._last_seen[kind] = now
        if last is None or now - last >= self.interval_s:
            self._emit(message)
            return True
        if self._window_start is None:
            self._window_start = now
        self.pending[kind] += 1
        return False

    def poll(self) -> None:
        """Write the summary if its window closed (cheap: call it every tick)."""
        self._roll(self.clock())

    def flush(self) -> None:
        """Write whatever is pending now (at shutdown)."""
        self._summarise(self.clock())

    def _roll(self, now: float) -> None:
        if self._window_start is not None and now - self._window_start >= self.interval_s:
            self._summarise(now)

    def _summarise(self, now: float) -> None:
        if not self.pending or self._window_start is None:
            return
        parts = ", ".join(self.describe(k, n) for k, n in self.pending.items())
        self._emit(f"{self.name}: {parts} in the last {now - self._window_start:.0f} s")
        self.pending.clear()
        self._window_start = None

    def _emit(self, line: str) -> None:
        if self.emit is not None:
            self.emit(line)
        else:
            self.logger.log(self.level, line)
