"""The live view's model: one typed snapshot, built by a pure function from the learner's own data.

Why one model: the served page, the ``snapshot.json`` beside it, the static copy in the run dir
and the console line all show the same numbers, so they are computed once, here, from what the
learner already has -- its metrics rows (the dicts ``learner.metrics.MetricsLogger`` logs and
``metrics.json`` keeps), the robot episodes that reached the replay (:class:`EpisodeRecord`) and
the newest camera frames (:class:`FrameView`). Nothing here does I/O or reads a clock, so the
numbers are tested exactly.

Where each number comes from (keys of the newest row unless said otherwise):

* success: ``success_rate`` (rolling, the loop's last 100 episodes); ``last_n``: the newest
  ``last_n`` episode records; per robot and per episode: the records;
* ``ingest/intervention_ratio``; ``weight_version`` (the policy version robots run),
  ``push/pushes`` / ``push/failures``;
* ``ingest/stored`` (robot steps in the learner's store, acknowledged to the robots); rates
  from the newest row of an earlier moment (fewer ``env_steps``) to the newest, over
  ``time/wall_s``: ingest = stored steps per second, learner
  = transitions paid per second (``updates`` / ``utd_ratio``); ``learner/backlog``,
  ``learner/utd_effective``, ``learner/transitions_trained_share`` (``learner.offpolicy.utd``);
* reward: the configured source (``ingest.reward``) and the classifier's agreement with the
  judge, ``reward_judge/fp_rate`` / ``fn_rate`` when robots report them
  (``learner.offpolicy.reward_judge``);
* held-out evals: ``eval/<split>/<key>`` of a row, and the final eval once the run has one.

>>> rows = [{"iteration": 0, "time/wall_s": 10.0, "updates": 100, "ingest/stored": 200},
...         {"iteration": 1, "time/wall_s": 20.0, "updates": 300, "ingest/stored": 360,
...          "success_rate": 0.5, "learner/backlog": 40.0, "weight_version": 7}]
>>> s = build_snapshot(rows, [], run="demo", utd_ratio=2.0)
>>> s.ingest_rate, s.learner_rate, s.backlog, s.policy_version, s.success_rate
(16.0, 10.0, 40.0, 7, 0.5)
>>> burst = [{"env_steps": 40, "time/wall_s": 10.0, "ingest/stored": 40},  # then 80 at once:
...          {"env_steps": 120, "time/wall_s": 14.0, "ingest/stored": 120},  # two rows
...          {"env_steps": 120, "time/wall_s": 14.0, "ingest/stored": 120}]
>>> build_snapshot(burst, [], run="demo").ingest_rate
20.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class EpisodeRecord:
    """One robot episode as it reached the replay (``ret``: the learner's reward, summed)."""

    robot_id: str
    episode: int
    success: bool
    steps: int
    ret: float
    interventions: int = 0
    policy_version: int = 0  # the newest policy version that acted in it


@dataclass(frozen=True)
class FrameView:
    """The newest frame of one robot's camera (``seq``: the transition it belongs to)."""

    robot_id: str
    camera: str
    height: int
    width: int
    seq: int


@dataclass(frozen=True)
class RobotView:
    robot_id: str
    episodes: int
    successes: int
    success_rate: float
    last_n_success_rate: float


@dataclass(frozen=True)
class Snapshot:
    """What the live view shows; ``None`` = not known (yet), shown as ``-``."""

    run: str
    iteration: int = -1
    wall_s: float = 0.0
    finished: bool = False
    env_steps: int = 0
    updates: int = 0
    episodes: int = 0
    success_rate: float | None = None
    last_n: int = 10
    success_last_n: float | None = None
    recent: tuple[EpisodeRecord, ...] = ()
    robots: tuple[RobotView, ...] = ()
    intervention_ratio: float | None = None
    evals: dict[str, float] = field(default_factory=dict)
    policy_version: int = 0
    pushes: int | None = None
    push_failures: int | None = None
    ingest_stored: int | None = None
    ingest_rate: float | None = None
    learner_rate: float | None = None
    backlog: float | None = None
    utd_effective: float | None = None
    trained_share: float | None = None
    reward_source: str = ""
    fp_rate: float | None = None
    fn_rate: float | None = None
    frames: tuple[FrameView, ...] = ()
    budget_left_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Snapshot:
        """Inverse of :meth:`to_dict` (the static page is re-rendered from its JSON)."""
        nested = {
            "recent": EpisodeRecord,
            "robots": RobotView,
            "frames": FrameView,
        }
        kw = dict(d)
        for key, kind in nested.items():
            kw[key] = tuple(kind(**x) for x in d.get(key, ()))
        return cls(**kw)


def _num(row: Mapping[str, Any], key: str) -> float | None:
    v = row.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _int(row: Mapping[str, Any], key: str) -> int | None:
    v = _num(row, key)
    return None if v is None else int(v)


def _earlier(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The row rates start from: the newest earlier row with fewer ``env_steps``. Why not simply
    the previous row: data arriving in a burst logs several rows at once (one per ``log_every``
    of the steps that came), all with the same counters, and a rate between two of them is 0
    over a few microseconds, not the ingest's."""
    now = _num(rows[-1], "env_steps") if rows else None
    for r in reversed(rows[:-1]):
        if now is None or _num(r, "env_steps") != now:
            return r
    return None


def _rate(rows: Sequence[Mapping[str, Any]], key: str, scale: float = 1.0) -> float | None:
    """``key`` per second from :func:`_earlier`'s row to the newest (``time/wall_s``), divided
    by ``scale``."""
    a = _earlier(rows)
    if a is None or scale <= 0:
        return None
    b = rows[-1]
    va, vb, ta, tb = _num(a, key), _num(b, key), _num(a, "time/wall_s"), _num(b, "time/wall_s")
    if va is None or vb is None or ta is None or tb is None or tb <= ta:
        return None
    return (vb - va) / (tb - ta) / scale


def _mean(xs: Sequence[bool]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def flat_evals(results: Any) -> dict[str, float]:
    """``{split: {key: v}}`` (or ``{key: v}``) -> ``{"split/key": v}``, numbers only.

    >>> flat_evals({"train": {"success_rate": 0.8, "episodes": 20}, "ood": {"note": "x"}})
    {'train/success_rate': 0.8, 'train/episodes': 20.0}
    """
    out: dict[str, float] = {}
    if not isinstance(results, Mapping):
        return out
    for split, res in results.items():
        items = res.items() if isinstance(res, Mapping) else [("", res)]
        for k, v in items:
            num = _num({"v": v}, "v")
            if num is not None:
                out[f"{split}/{k}" if k else str(split)] = num
    return out


def _robots(episodes: Sequence[EpisodeRecord], last_n: int) -> tuple[RobotView, ...]:
    by: dict[str, list[bool]] = {}
    for e in episodes:
        by.setdefault(e.robot_id, []).append(e.success)
    return tuple(
        RobotView(r, len(s), sum(s), sum(s) / len(s), sum(s[-last_n:]) / len(s[-last_n:]))
        for r, s in sorted(by.items())
    )


def _episodes(row: Mapping[str, Any], episodes: Sequence[EpisodeRecord]) -> int:
    """The row's episode count (the page's numbers are one row's); the records' only before a
    row counts episodes -- a row's ``0`` is a figure of its moment, not a missing one."""
    n = _int(row, "episodes")
    return len(episodes) if n is None else n


def build_snapshot(
    rows: Sequence[Mapping[str, Any]],
    episodes: Sequence[EpisodeRecord],
    frames: Sequence[FrameView] = (),
    *,
    run: str,
    reward_source: str = "",
    utd_ratio: float = 1.0,
    budget_left_s: float | None = None,
    evals: Any = None,
    finished: bool = False,
    last_n: int = 10,
    recent: int = 20,
) -> Snapshot:
    """The view of a run: ``rows`` oldest first, ``episodes`` in arrival order (oldest first),
    ``evals`` the final held-out result (``{split: {...}}``) when there is one."""
    row: Mapping[str, Any] = rows[-1] if rows else {}
    newest = list(episodes[-last_n:])
    row_evals = {k[len("eval/") :]: v for k, v in row.items() if k.startswith("eval/")}
    iteration = _int(row, "iteration")
    return Snapshot(
        run=run,
        iteration=-1 if iteration is None else iteration,
        wall_s=_num(row, "time/wall_s") or 0.0,
        finished=finished,
        env_steps=_int(row, "env_steps") or 0,
        updates=_int(row, "updates") or 0,
        episodes=_episodes(row, episodes),
        success_rate=_num(row, "success_rate"),
        last_n=last_n,
        success_last_n=_mean([e.success for e in newest]),
        recent=tuple(reversed(episodes[-recent:])),
        robots=_robots(episodes, last_n),
        intervention_ratio=_num(row, "ingest/intervention_ratio"),
        evals={**flat_evals(row_evals), **flat_evals(evals)},
        policy_version=_int(row, "weight_version") or 0,
        pushes=_int(row, "push/pushes"),
        push_failures=_int(row, "push/failures"),
        ingest_stored=_int(row, "ingest/stored"),
        ingest_rate=_rate(rows, "ingest/stored"),
        learner_rate=_rate(rows, "updates", utd_ratio),
        backlog=_num(row, "learner/backlog"),
        utd_effective=_num(row, "learner/utd_effective"),
        trained_share=_num(row, "learner/transitions_trained_share"),
        reward_source=reward_source,
        fp_rate=_num(row, "reward_judge/fp_rate"),
        fn_rate=_num(row, "reward_judge/fn_rate"),
        frames=tuple(sorted(frames, key=lambda f: (f.robot_id, f.camera))),
        budget_left_s=budget_left_s,
    )
