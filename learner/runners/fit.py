"""The one training loop of the learners that draw their batches: draw -> update -> log -> budget.

Why one loop: the offline (BC / IQL / DAgger), VLA SFT and reward-classifier runners, and the
update burst of the off-policy learner, all do the same thing -- draw a batch, call
``update`` of a :class:`~learner.algorithms.protocol.Algorithm`, now and then write a metrics
row (and whatever rides on it: a validation pass, a best-state copy, a checkpoint), stop when
the updates or the time budget run out. Stable-Baselines3 keeps that loop once in
``OffPolicyAlgorithm.learn``; here it is :func:`fit`, and a runner is its dataflow around it
(the on-policy runners, embodied and reasoning, draw nothing: each iteration updates once on the
rollouts it just collected, in the worker tree's ``train`` call)::

    data --> draw() --> algorithm.update --> Every(n, row) ... --> budget spent? --> stop

:class:`Cadence` is the same "every n" for counters that jump (env transitions arrive a vector
step or an episode at a time): the off-policy loop checkpoints with it.

>>> class Count:
...     def __init__(self): self.n = 0
...     def update(self, batch): self.n += batch; return {"n": float(self.n)}
...     def state_dict(self): return {"n": self.n}
...     def load_state_dict(self, state): self.n = state["n"]
...     def policy(self): return None
>>> rows = []
>>> fit(Count(), lambda: 1, 5, [Every(2, lambda step, m: rows.append((step, m["n"])))])
(5, {'n': 5.0})
>>> rows
[(2, 2.0), (4, 4.0), (5, 5.0)]
>>> c = Cadence.after(100, counter=130)
>>> c.due(180), c.due(260), c.due(290), c.due(300)
(False, True, False, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from learner.algorithms.protocol import Algorithm
from learner.runners.budget import Budget

__all__ = ["Every", "Cadence", "fit", "Rows"]

Hook = Callable[[int, dict[str, float]], None]


@dataclass(frozen=True)
class Every:
    """Call ``fn(step, metrics)`` after every ``n``-th update and after the last one."""

    n: int
    fn: Hook


@dataclass
class Cadence:
    """Fires once each time a monotone counter reaches the next multiple of ``every`` (0: never)."""

    every: int
    next: int = 0

    @classmethod
    def after(cls, every: int, counter: int) -> Cadence:
        """A cadence whose first firing is the first multiple of ``every`` above ``counter``."""
        return cls(every, cls._following(every, counter))

    @staticmethod
    def _following(every: int, counter: int) -> int:
        return 0 if not every else (counter // every + 1) * every

    def due(self, counter: int) -> bool:
        if not self.every or counter < self.next:
            return False
        self.next = self._following(self.every, counter)
        return True


def fit(
    algo: Algorithm,
    draw: Callable[[], Any],
    updates: int,
    hooks: Sequence[Every] = (),
    budget: Budget | None = None,
    start: int = 0,
) -> tuple[int, dict[str, float]]:
    """Run ``algo.update(draw())`` for steps ``start + 1 .. updates``; returns (last step, its
    metrics).

    After a step on which a hook fired, a spent ``budget`` (:meth:`Budget.training_over`) ends
    the loop: every run ends on a logged row, and no step runs past the budget by more than one
    row's worth of updates.
    """
    step, metrics = start, {}
    while step < updates:
        metrics = algo.update(draw())
        step += 1
        fired = False
        for hook in hooks:
            if step % hook.n == 0 or step == updates:
                hook.fn(step, metrics)
                fired = True
        if fired and budget is not None and budget.training_over():
            break
    return step, metrics


@dataclass
class Rows:
    """The metrics history of a runner on fixed data: one row per logged step, the format of the
    other runners' ``metrics.json`` (``iteration`` = row index, ``updates``, ``train/*``,
    ``time/wall_s``) plus ``extra`` (e.g. the current DAgger round's statistics)."""

    t0: float = field(default_factory=time.perf_counter)
    history: list[dict[str, float]] = field(default_factory=list)
    extra: dict[str, float] = field(default_factory=dict)

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        self.history.append(
            {
                "iteration": float(len(self.history)),
                "updates": float(step),
                **self.extra,
                **{f"train/{k}": v for k, v in metrics.items()},
                "time/wall_s": time.perf_counter() - self.t0,
            }
        )

    @property
    def updates(self) -> int:
        """Updates logged so far (where the next :func:`fit` of a multi-round run starts)."""
        return int(self.history[-1]["updates"]) if self.history else 0
