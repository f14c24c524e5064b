"""The console bar of a budgeted run, in the unit that moves: :class:`BudgetBar`.

Why: a bar over metrics rows (one per ``train.log_every`` env steps) sat at ``0/200`` for
minutes while a robot streamed transitions, then showed tqdm's ETA for all 200 rows -- hours,
with three minutes of budget left. This bar counts what moves from the first second (env steps
in simulation, transitions received from robots), and its total and ETA follow one rule
(:meth:`learner.runners.budget.Budget.units_that_fit`): the planned count, or what fits in the
training part of the budget at the rate measured since the count first moved, whichever is
smaller. The ETA is computed here, not by tqdm's smoothing, so it is never past the budget.

>>> eta_s(done=500, total=1100, rate_per_s=10.0)
60.0
>>> clock_text(125.0), clock_text(None)
('2:05', '?')
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from learner.runners.budget import Budget

BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}{postfix}]"
REFRESH_S = 0.5  # the bar is redrawn at most this often (the loop may advance it 1000x/s)


def eta_s(done: int, total: int, rate_per_s: float) -> float | None:
    """Seconds to reach ``total`` at ``rate_per_s`` (None before the count moved)."""
    if rate_per_s <= 0:
        return None
    return max(0, total - done) / rate_per_s


def clock_text(seconds: float | None) -> str:
    """``m:ss`` (``h:mm:ss`` past an hour); ``?`` when unknown."""
    if seconds is None:
        return "?"
    s = max(0, round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


@dataclass
class Rate:
    """Units per second since the count first moved (a robot may start streaming late)."""

    t_first: float | None = None
    n_first: int = 0

    def update(self, done: int, now: float) -> float:
        if self.t_first is None:
            if done > 0:
                self.t_first, self.n_first = now, done
            return 0.0
        dt = now - self.t_first
        return (done - self.n_first) / dt if dt > 0 and done > self.n_first else 0.0


@dataclass
class BudgetBar:
    """A tqdm bar over ``planned`` units whose total shrinks to what fits in ``budget``.
    ``advance(done, **shown)`` is cheap to call every loop pass; ``shown`` values (metrics,
    updates) go to the bar's postfix."""

    planned: int
    budget: Budget | None
    unit: str = "env steps"
    desc: str = "train"
    enabled: bool = True
    start: int = 0
    clock: Callable[[], float] = time.perf_counter
    rate: Rate = field(default_factory=Rate)
    total: int = 0
    eta: float | None = None
    _bar: Any = None
    _drawn_at: float = -float("inf")

    def __post_init__(self) -> None:
        self.total = self.planned
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.planned,
                initial=min(self.start, self.planned),
                desc=self.desc,
                unit=self.unit,
                bar_format=BAR_FORMAT,
                dynamic_ncols=True,
            )

    def advance(self, done: int, force: bool = False, **shown: Any) -> None:
        now = self.clock()
        rate = self.rate.update(done - self.start, now)
        if not force and now - self._drawn_at < REFRESH_S:
            return
        self._drawn_at = now
        fit = self.budget.units_that_fit(done, rate, now, self.planned) if self.budget else None
        self.total = self.planned if fit is None else max(done, fit)
        self.eta = eta_s(done, self.total, rate)
        post = {k: f"{v:.3g}" if isinstance(v, float) else str(v) for k, v in shown.items()}
        post["eta"] = clock_text(self.eta)
        if self.budget is not None and self.budget.seconds is not None:
            post["budget_left"] = clock_text(self.budget.left(now))
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.n = min(done, self.total)
            self._bar.set_postfix(post, refresh=False)
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
