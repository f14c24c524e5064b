"""How evenly a real-time loop ran: the wall time between a timer's ticks and the time a piece of
work took, kept as a bounded window and summarised in one line when a node stops.

Why: a simulated twin that runs in real time steps its physics to the wall clock, so a late
driver tick (the camera renders, a busy CPU) becomes a larger physics chunk with an older
command, and a policy can do worse on the twin than in the simulator for reasons no success
figure shows. The robot node's last line (``driver loop: ...``) says how late its ticks came and
how much physics time it dropped, so two runs of one checkpoint can be told apart by timing.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import numpy as np


class Durations:
    """The newest ``keep`` durations (seconds) with percentiles in milliseconds."""

    def __init__(self, keep: int = 20_000) -> None:
        self.values: deque[float] = deque(maxlen=keep)
        self.count = 0

    def add(self, seconds: float) -> None:
        self.values.append(seconds)
        self.count += 1

    def ms(self, q: float) -> float | None:
        """``q``-th percentile in ms of the kept window; None before the first value."""
        if not self.values:
            return None
        return float(np.percentile(np.fromiter(self.values, float), q)) * 1e3


class TickIntervals(Durations):
    """Wall time between successive :meth:`tick` calls of a timer with period ``period_s``."""

    def __init__(
        self, period_s: float, keep: int = 20_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(keep)
        self.period_s = period_s
        self.clock = clock
        self.late = 0  # intervals over twice the period: a tick that came a period late or more
        self._last: float | None = None

    def tick(self) -> None:
        now = self.clock()
        if self._last is not None:
            gap = now - self._last
            self.add(gap)
            self.late += gap > 2 * self.period_s
        self._last = now


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f} ms"


def driver_summary(
    ticks: TickIntervals, dropped_s: float = 0.0, render: Durations | None = None
) -> str:
    """The robot node's last line: tick count, interval p50 / p99 / max, late ticks, physics time
    dropped (a simulated arm more than its substep cap behind the wall), camera render time.

    >>> t = TickIntervals(0.01, clock=iter([0.0, 0.01, 0.02, 0.05, 0.06]).__next__)
    >>> for _ in range(5):
    ...     t.tick()
    >>> r = Durations()
    >>> r.add(0.006)
    >>> for part in driver_summary(t, dropped_s=0.25, render=r).split("; "):
    ...     print(part)
    driver loop: 4 tick intervals of 10 ms, p50 10 ms, p99 29 ms, max 30 ms, 1 late (> 2 periods)
    physics time dropped 0.25 s
    camera render p50 6 ms, p99 6 ms
    """
    period = f"{ticks.period_s * 1e3:.0f} ms"
    line = (
        f"driver loop: {ticks.count} tick intervals of {period}, p50 {_ms(ticks.ms(50))}, "
        f"p99 {_ms(ticks.ms(99))}, max {_ms(ticks.ms(100))}, {ticks.late} late (> 2 periods); "
        f"physics time dropped {dropped_s:.2f} s"
    )
    if render is not None and render.count:
        line += f"; camera render p50 {_ms(render.ms(50))}, p99 {_ms(render.ms(99))}"
    return line


def stale_observation_warning(age_ms_p50: float | None, period_s: float) -> str | None:
    """The policy client's warning when its commands answer observations over half a control
    period old (p50), else None.

    Why: with cameras no faster than the control loop, the phase between the frames and the
    control tick decides how old each frame is when acted on (0 to a whole period), fixed for a
    whole run; a policy trained without that delay (in the simulator, the action answers the
    state it is applied to) acts a step late. Measured on the camera-only push twin with 20 Hz
    frames and 20 Hz control: passes at 44-50 ms scored 0.56-0.72 where the same checkpoints
    score 0.84-0.98 with 60 Hz frames (``benchmarks/results/ros_twin_policy_alone_*``).

    >>> stale_observation_warning(21.0, 0.05) is None
    True
    >>> warning = stale_observation_warning(44.0, 0.05)
    >>> print(warning.split(": ")[0])
    observations are 44 ms old when their commands go out (p50), 88% of the 50 ms control period
    >>> warning.endswith("(a simulated twin: robot.scene.camera_hz)")
    True
    """
    if age_ms_p50 is None or age_ms_p50 <= 0.5 * period_s * 1e3:
        return None
    return (
        f"observations are {age_ms_p50:.0f} ms old when their commands go out (p50), "
        f"{age_ms_p50 / (period_s * 1e3):.0%} of the {period_s * 1e3:.0f} ms control period: "
        "cameras no faster than the control loop leave each frame's age to the phase between "
        "the two; run the cameras faster than the control rate (a simulated twin: "
        "robot.scene.camera_hz)"
    )
