"""The update/data ratio a learner actually keeps, and a bounded backlog when it cannot keep up.

Why: robots do not wait for the learner. At ``utd_ratio`` updates per transition a learner that
manages fewer updates per second than ``utd_ratio`` x the robots' transitions per second falls
further behind every second -- its owed updates (and the transitions queued in front of the
replay) grow without bound, it trains on ever older data and most of what the robots produce
never reaches a gradient, and nothing says so. :class:`UtdMeter` bounds the debt and says it:

* **bounded backlog**: owed updates beyond ``cap`` (``algorithm.max_backlog_updates``) are
  dropped, so the learner keeps ingesting the newest data at the ratio it can sustain;
* **what it keeps**: every metrics row carries ``learner/utd_effective`` (updates per arrived
  transition over the row's window), ``learner/utd_sustainable`` (the ratio it could keep: the
  updates that fit in the window's time not taken by its other work, per arrived transition --
  see :meth:`UtdMeter.row`),
  ``learner/backlog`` (owed updates, including those owed by transitions still queued in front
  of the replay), ``learner/dropped_updates`` and ``learner/transitions_trained_share``;
* **one log line** when the kept ratio first falls below ``utd_ratio`` or later moves by more
  than a fifth, and when it recovers -- not every row.

What "reached a gradient" means here (``transitions_trained_share``): a transition that arrived
after ``train.learning_starts`` owes ``utd_ratio`` updates; it has reached its gradients when
those updates ran. The share is ``1 - (dropped + owed + utd_ratio x pending) / (accrued +
utd_ratio x pending)``: ``accrued`` every update owed by transitions in the replay, ``pending``
the transitions that arrived (stored by the ingest) but are not in the replay yet. It counts
gradient *work* done for the data, not which rows a batch happened to draw (a batch is drawn
from the whole replay, so the newest data takes part in every update once it is there).

>>> m = UtdMeter(utd_ratio=2.0, cap=10)
>>> m.owe(owed=0.0, new=6.0), m.owe(owed=6.0, new=8.0), m.dropped
(6.0, 10.0, 4.0)
>>> round(m.trained_share(owed=0.0, pending=0), 3)
0.714
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
CHANGE = 0.2  # relative change of the kept ratio that earns a new log line
SHORT = 0.9  # kept / configured below this: the learner is behind


@dataclass
class _Mark:
    updates: int = 0
    arrived: float = 0.0
    wall_s: float = 0.0
    busy_s: float = 0.0
    cpu_s: float | None = None


@dataclass
class UtdMeter:
    """Debt bookkeeping of one learner: ``cap`` 0 = no cap (every owed update is paid)."""

    utd_ratio: float
    cap: float = 0.0
    accrued: float = 0.0  # updates owed by transitions that reached the replay (before the cap)
    dropped: float = 0.0  # owed updates dropped at the cap
    busy_s: float = 0.0  # seconds spent updating
    mark: _Mark = field(default_factory=_Mark)
    logged: float | None = None  # the kept ratio of the last log line (None: none yet)

    def owe(self, owed: float, new: float) -> float:
        """The debt after ``new`` owed updates join ``owed``, capped; the excess is dropped."""
        self.accrued += new
        owed += new
        if self.cap and owed > self.cap:
            self.dropped += owed - self.cap
            owed = float(self.cap)
        return owed

    def trained_share(self, owed: float, pending: int) -> float:
        """Share of the owed gradient work done for the data that arrived (module docstring)."""
        queued = self.utd_ratio * pending
        total = self.accrued + queued
        if total <= 0:
            return 1.0
        return min(1.0, max(0.0, 1.0 - (self.dropped + max(owed, 0.0) + queued) / total))

    def row(
        self,
        updates: int,
        arrived: float,
        owed: float,
        pending: int,
        wall_s: float,
        cpu_s: float | None = None,
    ) -> dict[str, float]:
        """The metrics of one row; ``arrived``: transitions after ``learning_starts`` that reached
        the replay or wait in front of it; ``wall_s``: a monotonic clock; ``cpu_s``: the learner
        process's CPU seconds (``time.process_time()``), or None.

        ``utd_sustainable`` is the window's update time plus its spare time, divided by the cost
        of one update, per arrived transition. Spare time is the wall time the process's CPU did
        not use: its other work -- a frozen encoder run on every new frame as it enters the
        replay, unpacking what arrives, pushing weights -- takes the same core the updates need,
        and counting the whole window as update time said a pixel learner with a full core could
        keep 2.2 updates per transition when it kept 1. Without ``cpu_s`` the whole window
        counts. A process whose updates run on several threads uses more CPU than wall time and
        reads as having no spare time.
        """
        m = {
            "learner/backlog": max(owed, 0.0) + self.utd_ratio * pending,
            "learner/dropped_updates": self.dropped,
            "learner/transitions_trained_share": self.trained_share(owed, pending),
        }
        d_arrived = arrived - self.mark.arrived
        d_updates = updates - self.mark.updates
        if d_arrived > 0:
            kept = d_updates / d_arrived
            m["learner/utd_effective"] = kept
            d_busy, d_wall = self.busy_s - self.mark.busy_s, wall_s - self.mark.wall_s
            if d_busy > 0 and d_wall > 0 and d_updates > 0:
                capacity = d_wall
                if cpu_s is not None and self.mark.cpu_s is not None:
                    other = min(max(cpu_s - self.mark.cpu_s - d_busy, 0.0), d_wall - d_busy)
                    capacity = d_wall - other
                m["learner/utd_sustainable"] = capacity / (d_busy / d_updates) / d_arrived
            self._say(kept, m)
        self.mark = _Mark(updates, arrived, wall_s, self.busy_s, cpu_s)
        return m

    def _say(self, kept: float, m: dict[str, float]) -> None:
        behind = kept < SHORT * self.utd_ratio
        if self.logged is None:
            if not behind:
                return
        elif behind and abs(kept - self.logged) <= CHANGE * max(self.logged, 1e-9):
            return
        elif not behind and self.logged >= SHORT * self.utd_ratio:
            return
        self.logged = kept
        if not behind:
            log.info("learner keeps up again: %.2f updates per transition", kept)
            return
        could = m.get("learner/utd_sustainable")
        log.warning(
            "learner behind the data: %.2f updates per arrived transition of utd_ratio %.2f%s; "
            "backlog %.0f updates, %.0f dropped so far, %.0f%% of the owed gradient work done "
            "(algorithm.max_backlog_updates bounds the backlog)",
            kept,
            self.utd_ratio,
            "" if could is None else f" (it could sustain {could:.2f})",
            m["learner/backlog"],
            self.dropped,
            100.0 * m["learner/transitions_trained_share"],
        )

    def counters(self) -> dict[str, float]:
        """What a checkpoint carries (flat, beside the learner's other counters)."""
        return {"utd_accrued": self.accrued, "utd_dropped": self.dropped}

    def restore(self, c: dict[str, float]) -> None:
        """From :meth:`counters`' keys; absent in checkpoints written before them: zeros."""
        self.accrued = float(c.get("utd_accrued", 0.0))
        self.dropped = float(c.get("utd_dropped", 0.0))
