"""The live view as one console line, printed at most every few seconds and only when it changed.

Why a line of its own next to the tqdm bar (``learner.metrics``): the bar shows the training
loop's counters; a person watching a robot wants the robot's side -- episodes, success, the
policy version it runs, whether the learner keeps up, the reward's trustworthiness, time left --
in one glance. "Changed" ignores the budget clock, which changes every second by itself.

>>> s = Snapshot("r", episodes=12, success_rate=0.42, success_last_n=0.6, policy_version=37,
...              pushes=12, ingest_rate=16.2, learner_rate=15.9, backlog=40.0,
...              reward_source="stream", fp_rate=0.03, fn_rate=0.1, budget_left_s=750.0)
>>> console_line(s)
'robot 12 ep, success 0.42 (last 10: 0.60) | v37 pushed 12 | ingest 16.2/s learner 15.9/s \
backlog 40 | reward stream fp 0.03 fn 0.10 | budget 12:30 left'
"""

from __future__ import annotations

import time
from collections.abc import Callable

from learner.live.snapshot import Snapshot


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def clock(seconds: float | None) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour) of a non-negative duration; ``-`` when unknown.

    >>> clock(750.0), clock(3725.4), clock(None)
    ('12:30', '1:02:05', '-')
    """
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def _parts(s: Snapshot) -> list[str]:
    reward = f"reward {s.reward_source or '-'}"
    if s.fp_rate is not None or s.fn_rate is not None:
        reward += f" fp {_f(s.fp_rate, '.2f')} fn {_f(s.fn_rate, '.2f')}"
    pushed = "" if s.pushes is None else f" pushed {s.pushes}"
    return [
        f"robot {s.episodes} ep, success {_f(s.success_rate, '.2f')} "
        f"(last {s.last_n}: {_f(s.success_last_n, '.2f')})",
        f"v{s.policy_version}{pushed}",
        f"ingest {_f(s.ingest_rate, '.1f')}/s learner {_f(s.learner_rate, '.1f')}/s "
        f"backlog {_f(s.backlog, '.0f')}",
        reward,
    ]


def console_line(s: Snapshot) -> str:
    parts = _parts(s)
    if s.budget_left_s is not None:
        parts.append(f"budget {clock(s.budget_left_s)} left")
    if s.finished:
        parts.append("finished")
    return " | ".join(parts)


class ConsoleTicker:
    """Prints :func:`console_line` through ``emit`` at most every ``every_s`` seconds, and only
    when something other than the budget clock changed. ``now`` is injectable for tests."""

    def __init__(
        self,
        emit: Callable[[str], None],
        every_s: float,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emit, self.every_s, self.now = emit, every_s, now
        self._last_key: tuple[str, ...] | None = None
        self._last_t = -float("inf")

    def offer(self, s: Snapshot, force: bool = False) -> bool:
        """True when a line was emitted (``force``: whenever it changed, e.g. the last one)."""
        key = (*_parts(s), str(s.finished))
        t = self.now()
        if key == self._last_key or (t - self._last_t < self.every_s and not force):
            return False
        self._last_key, self._last_t = key, t
        self.emit(console_line(s))
        return True
