"""The live view's HTML: one self-contained page per snapshot, no script, no external asset.

Why server-rendered and script-free: the same function writes the page the learner serves
(refreshing itself every few seconds) and the static copy in ``<out_dir>/live/index.html`` that
opens from disk after the run, with no fetch that a ``file://`` page could not make. Numbers carry
element ids (``success-rate``, ``backlog``, ``policy-version``, ...) so a browser test and a
person's scraper find them.

Safety events: the robots' transition stream carries none (each episode's info holds the task,
the robot and the reward judge's report); the robot node publishes its arms' safety counters on
its robot-state topic, so the page says so instead of showing zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from learner.live.console import clock
from learner.live.snapshot import FrameView, Snapshot

SAFETY_NOTE = (
    "The robots' transition stream carries no safety events; each robot node publishes its "
    "arms' safety counters (e-stop, limits, watchdog) on its robot-state topic."
)
_CSS = """
body{font:14px system-ui,sans-serif;margin:16px;background:#fafafa;color:#222}
h1{font-size:20px;margin:0 0 4px} h2{font-size:15px;margin:0 0 6px}
.grid{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:220px}
.big{font-size:22px;font-weight:600} .dim{color:#777}
table{border-collapse:collapse} td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #eee}
td:first-child,th:first-child{text-align:left} .ok{color:#1a7f37} .bad{color:#b42318}
figure{margin:0} img{image-rendering:pixelated;border:1px solid #ccc;width:192px}
"""


def _v(v: float | int | None, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def _stat(label: str, ident: str, value: str) -> str:
    return f'<div>{escape(label)}: <span class="big" id="{ident}">{escape(value)}</span></div>'


def _table(head: list[str], rows: list[list[str]], ident: str) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table id="{ident}"><tr>{th}</tr>{body}</table>'


def _robot_card(s: Snapshot) -> str:
    per_robot = _table(
        ["robot", "episodes", "successes", "success", f"last {s.last_n}"],
        [
            [
                escape(r.robot_id),
                str(r.episodes),
                str(r.successes),
                _v(r.success_rate, ".2f"),
                _v(r.last_n_success_rate, ".2f"),
            ]
            for r in s.robots
        ],
        "robots",
    )
    recent = _table(
        ["robot", "episode", "result", "steps", "return", "interventions", "policy"],
        [
            [
                escape(e.robot_id),
                str(e.episode),
                '<span class="ok">success</span>' if e.success else '<span class="bad">fail</span>',
                str(e.steps),
                f"{e.ret:.2f}",
                str(e.interventions),
                f"v{e.policy_version}",
            ]
            for e in s.recent
        ],
        "recent-episodes",
    )
    return (
        '<div class="card"><h2>Robots</h2>'
        + _stat("episodes", "episodes", str(s.episodes))
        + _stat("success rate (rolling)", "success-rate", _v(s.success_rate))
        + _stat(f"success, last {s.last_n}", "success-last-n", _v(s.success_last_n))
        + _stat("intervention ratio", "intervention-ratio", _v(s.intervention_ratio))
        + f"{per_robot}<h2>Recent episodes</h2>{recent}</div>"
    )


def _learner_card(s: Snapshot) -> str:
    pushes = "-" if s.pushes is None else str(s.pushes)
    failures = (
        "" if not s.push_failures else f' <span class="bad">({s.push_failures} failed)</span>'
    )
    return (
        '<div class="card"><h2>Policy</h2>'
        + _stat("policy version", "policy-version", f"v{s.policy_version}")
        + _stat("pushes", "pushes", pushes)
        + failures
        + _stat("updates", "updates", str(s.updates))
        + "<h2>Ingest vs learner</h2>"
        + _stat("transitions stored", "ingest-stored", _v(s.ingest_stored, "d"))
        + _stat("ingest, transitions/s", "ingest-rate", _v(s.ingest_rate, ".1f"))
        + _stat("learner, transitions/s", "learner-rate", _v(s.learner_rate, ".1f"))
        + _stat("backlog, updates", "backlog", _v(s.backlog, ".0f"))
        + _stat("updates per transition", "utd-effective", _v(s.utd_effective, ".2f"))
        + _stat("transitions trained", "trained-share", _v(s.trained_share, ".2f"))
        + "</div>"
    )


def _reward_card(s: Snapshot) -> str:
    judged = s.fp_rate is not None or s.fn_rate is not None
    agreement = (
        _stat("classifier false-positive rate", "fp-rate", _v(s.fp_rate))
        + _stat("classifier false-negative rate", "fn-rate", _v(s.fn_rate))
        if judged
        else '<div class="dim" id="judge-none">no judge reports from the robots</div>'
    )
    evals = (
        _table(
            ["split / metric", "value"], [[escape(k), _v(v)] for k, v in s.evals.items()], "evals"
        )
        if s.evals
        else '<div class="dim" id="evals-none">none yet (the held-out eval runs at the end)</div>'
    )
    return (
        '<div class="card"><h2>Reward</h2>'
        + _stat("source", "reward-source", s.reward_source or "-")
        + agreement
        + f"<h2>Held-out evals</h2>{evals}"
        + f'<h2>Safety events</h2><div class="dim" id="safety">{escape(SAFETY_NOTE)}</div></div>'
    )


def _frames_card(s: Snapshot, frame_src: Callable[[FrameView], str]) -> str:
    if not s.frames:
        figs = '<div class="dim">no camera frames yet</div>'
    else:
        figs = "".join(
            f'<figure><img src="{escape(frame_src(f))}" alt="{escape(f.robot_id)} '
            f'{escape(f.camera)}"><figcaption>{escape(f.robot_id)} / {escape(f.camera)} '
            f'<span class="dim">seq {f.seq}</span></figcaption></figure>'
            for f in s.frames
        )
    return f'<div class="card"><h2>Latest camera frames</h2><div class="grid">{figs}</div></div>'


def render_page(
    s: Snapshot,
    frame_src: Callable[[FrameView], str],
    json_href: str,
    refresh_s: float | None = None,
) -> str:
    """The page of ``s``; ``frame_src`` gives each frame's image URL, ``refresh_s`` (live only)
    makes the browser reload it."""
    refresh = "" if refresh_s is None else f'<meta http-equiv="refresh" content="{refresh_s:g}">'
    state = "finished" if s.finished else "running"
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{refresh}'
        '<link rel="icon" href="data:,">'
        f"<title>{escape(s.run)} - live</title><style>{_CSS}</style></head><body>"
        f'<h1>{escape(s.run)} <span class="dim" id="state">{state}</span></h1>'
        f'<div class="dim">row {s.iteration}, {s.env_steps} transitions, '
        f'{clock(s.wall_s)} elapsed, budget left <span id="budget-left">'
        f'{clock(s.budget_left_s)}</span> &middot; <a href="{escape(json_href)}">snapshot.json</a>'
        f'</div><div class="grid">{_robot_card(s)}{_learner_card(s)}{_reward_card(s)}</div>'
        f"{_frames_card(s, frame_src)}</body></html>"
    )
