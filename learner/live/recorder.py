"""The live view wired to a learner: taps for transitions and episodes, snapshots, console, server.

The ingesting learner (``learner.offpolicy.remote``) hands every arriving transition
(:meth:`LiveRecorder.transition`: its camera frames) and every robot episode that reached the
replay (:meth:`LiveRecorder.episode`) to the recorder; the metrics rows it reads from the train
loop's history. A thread of its own then, every few seconds, builds the
:class:`~learner.live.snapshot.Snapshot`, prints the console line when it changed and writes the
static copy; the :class:`~learner.live.server.LiveServer` builds one per request.

Why a static copy in the run directory (and no separate viewer command): ``<out_dir>/live/``
holds ``index.html`` (the same page, without auto-refresh), ``snapshot.json`` and ``frames/``
(the newest PNG per robot and camera), written every ``live.snapshot_every_s`` and once more at
the end, so the page of a finished -- or crashed -- run opens from disk with any browser, needs
no token and no running process, and is copied with the run. :func:`add_final_eval` puts the
held-out eval (which runs after the learner stops) into it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from learner.live.config import LiveSection
from learner.live.console import ConsoleTicker
from learner.live.frames import FrameTap
from learner.live.page import render_page
from learner.live.server import LiveServer
from learner.live.snapshot import EpisodeRecord, FrameView, Snapshot, build_snapshot, flat_evals
from rlinf_contracts.config import ConfigError

log = logging.getLogger(__name__)
LIVE_DIR, INDEX, SNAPSHOT_JSON, FRAMES = "live", "index.html", "snapshot.json", "frames"
MAX_EPISODES = 100_000  # episode records kept for the per-robot tallies (a few MB at most)
REFRESH_S = 5.0  # the served page reloads itself this often
RATE_ROWS = 64  # newest metrics rows a snapshot sees (the newest is the one it shows)


def frame_file(f: FrameView) -> str:
    """The static copy's file name of a frame (robot and camera names made path-safe).

    >>> frame_file(FrameView("arm/0", "wrist cam", 2, 2, 0))
    'arm_0__wrist_cam.png'
    """
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{f.robot_id}__{f.camera}") + ".png"


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")  # whole or not at all: a reader never sees half
    tmp.write_bytes(data)
    tmp.replace(path)


def write_static(
    root: Path, s: Snapshot, png: Callable[[FrameView], bytes | None] | None = None
) -> Path:
    """``root/index.html``, ``root/snapshot.json`` and (with ``png``) ``root/frames/*.png``."""
    (root / FRAMES).mkdir(parents=True, exist_ok=True)
    for f in s.frames:
        data = png(f) if png is not None else None
        if data is not None:
            _write(root / FRAMES / frame_file(f), data)
    _write(root / SNAPSHOT_JSON, json.dumps(s.to_dict(), indent=1).encode())
    html = render_page(s, lambda f: f"{FRAMES}/{frame_file(f)}", SNAPSHOT_JSON)
    _write(root / INDEX, html.encode())
    return root / INDEX


def add_final_eval(out_dir: str | Path, evals: Any) -> Path | None:
    """The run's held-out eval into its static page (None when the run kept no live view)."""
    root = Path(out_dir) / LIVE_DIR
    if not (root / SNAPSHOT_JSON).is_file():
        return None
    s = Snapshot.from_dict(json.loads((root / SNAPSHOT_JSON).read_text()))
    return write_static(root, replace(s, evals={**s.evals, **flat_evals(evals)}, finished=True))


def record(ep: Any) -> EpisodeRecord:
    """An :class:`EpisodeRecord` of a robot episode as the ingest assembled it."""
    steps = ep.steps
    versions = np.asarray(steps.get("policy_version", [0]))
    return EpisodeRecord(
        robot_id=str(ep.info.extra.get("robot_id", "?")),
        episode=int(ep.info.extra.get("robot_episode", -1)),
        success=bool(ep.info.success),
        steps=len(steps["reward"]),
        ret=float(np.sum(steps["reward"])),
        interventions=int(np.sum(steps.get("intervention", [0]))),
        policy_version=int(versions.max()) if versions.size else 0,
    )


def _console(line: str) -> None:
    from tqdm import tqdm

    tqdm.write(line)  # above the training bar, not through it


class LiveRecorder:
    """``start()`` serves and snapshots; ``stop()`` writes the final snapshot and stops."""

    def __init__(
        self,
        section: LiveSection,
        token: str,
        out_dir: str | Path,
        run: str,
        rows: Callable[[], Sequence[dict[str, Any]]],
        budget_left: Callable[[], float | None] = lambda: None,
        reward_source: str = "",
        utd_ratio: float = 1.0,
        emit: Callable[[str], None] = _console,
    ) -> None:
        self.section, self.token, self.run = section, token, run
        self.root = Path(out_dir) / LIVE_DIR
        self.rows, self.budget_left = rows, budget_left
        self.reward_source, self.utd_ratio = reward_source, utd_ratio
        self.frames = FrameTap()
        self.ticker = ConsoleTicker(emit, section.console_every_s)
        self._episodes: deque[EpisodeRecord] = deque(maxlen=MAX_EPISODES)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-snapshots", daemon=True)
        self.server: LiveServer | None = None

    # ---- taps (the learner's thread) ----------------------------------------------------------
    def transition(self, t: Any) -> None:
        """One ``IngestedTransition``: its camera images become the robot's newest frames."""
        images = t.obs.get("images") or {}
        if images:
            self.frames.offer(t.robot_id, images, t.seq)

    def episode(self, ep: Any) -> None:
        rec = record(ep)
        with self._lock:
            self._episodes.append(rec)

    # ---- the view -----------------------------------------------------------------------------
    def snapshot(self, finished: bool = False) -> Snapshot:
        # the loop appends; a slice of a list is read atomically. The rates look back past a
        # burst of rows logged at once (snapshot._earlier): a few dozen rows are plenty
        rows = list(self.rows()[-RATE_ROWS:])
        with self._lock:
            episodes = list(self._episodes)
        return build_snapshot(
            rows,
            episodes,
            self.frames.views(),
            run=self.run,
            reward_source=self.reward_source,
            utd_ratio=self.utd_ratio,
            budget_left_s=self.budget_left(),
            finished=finished,
            recent=self.section.recent_episodes,
        )

    def write(self, finished: bool = False) -> Path:
        s = self.snapshot(finished)
        self.ticker.offer(s, force=finished)
        return write_static(self.root, s, lambda f: self.frames.png(f.robot_id, f.camera))

    def _run(self) -> None:
        every = self.section.snapshot_every_s
        tick = min(every, self.section.console_every_s)
        waited = 0.0
        while not self._stop.wait(tick):
            waited += tick
            try:
                if waited >= every:
                    waited = 0.0
                    self.write()
                else:
                    self.ticker.offer(self.snapshot())
            except Exception:  # the view never stops the learner
                log.exception("live view: snapshot failed")

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> LiveRecorder:
        c = self.section
        try:
            self.server = LiveServer(
                self.snapshot,
                self.frames.png,
                self.token,
                c.host,
                c.port,
                REFRESH_S,
            ).start()
        except OSError as e:  # port taken, address not on this machine
            raise ConfigError(
                f"keys 'live.host' / 'live.port': cannot listen on {c.host}:{c.port}: {e}"
            ) from None
        self.write()
        self._thread.start()
        log.info(
            "live view on %s (open it with ?token=<the view's token>); snapshots in %s",
            self.server.url,
            self.root / INDEX,
        )
        return self

    @property
    def url(self) -> str:
        return self.server.url if self.server is not None else ""

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30.0)
        try:
            self.write(finished=True)
        finally:
            if self.server is not None:
                self.server.stop()
                self.server = None
