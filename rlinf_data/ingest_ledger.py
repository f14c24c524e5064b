"""The ingest's durable per-robot bookkeeping: ``Ledger`` (stored seqs, open episodes).

Split out of :mod:`rlinf_data.ingest` so the store-side logic (de-duplication by seq, one store
batch per episode per turn, the pairing of a step with its next observation, see that module's
docstring for the on-disk seq state) lives apart from the websocket server that feeds it one turn
at a time; it runs on the single store-writer thread and knows nothing of connections. Also holds
:func:`layout_mismatch`, the check of a step against the learner's layout. Re-exported by
:mod:`rlinf_data.ingest`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from rlinf_contracts.episode import EpisodeInfo, Step, StepLayout
from rlinf_contracts.transitions import Transition, TransitionAck
from rlinf_data.ingest_config import IngestedTransition
from rlinf_data.store import EpisodeStore, EpisodeWriter

log = logging.getLogger("rlinf_data.ingest")  # the name the ingest always logged under
LAST_SEQ_ATTR = "ingest_last_seq"


@dataclass
class _Robot:
    last_seq: int = -1
    stored: int = 0  # steps stored since this ledger opened
    duplicates: int = 0  # items received again and not stored
    writer: EpisodeWriter | None = None
    episode: int = -1  # robot-local episode of `writer`
    infos: dict[int, dict[str, Any]] = field(
        default_factory=dict
    )  # robot episode -> info (to continue one)
    pending: tuple[Transition, str] | None = None  # newest step, waiting for its next observation
    batch: list[Transition] = field(
        default_factory=list
    )  # steps of `writer` received in this turn, stored together by `Ledger._flush`


def _step(t: Transition) -> Step:
    """The store step of a transition that carries one."""
    assert t.step is not None
    return t.step.step(t.reward, t.terminated, t.truncated)


def _obs(state: np.ndarray, images: dict[str, np.ndarray]) -> dict[str, Any]:
    return {"state": np.asarray(state), "images": {k: np.asarray(v) for k, v in images.items()}}


class Ledger:
    """The ingest's durable bookkeeping, one thread at a time: which seqs each robot has stored,
    which store episode is open for it, and the pairing of steps with their next observation."""

    def __init__(
        self, store: EpisodeStore, emit: Callable[[IngestedTransition], None] | None = None
    ) -> None:
        self.store, self.emit = store, emit
        self.robots: dict[str, _Robot] = {}
        self.stats = {"stored": 0, "duplicates": 0, "gaps": 0, "episodes": 0}
        self._scan()

    def _scan(self) -> None:
        persisted: dict[str, Any] = dict(cast(dict, self.store.root.attrs.get(LAST_SEQ_ATTR, {})))
        for robot, seq in persisted.items():
            self._robot(robot).last_seq = int(seq)
        for i in range(len(self.store)):
            info = self.store.info(i)
            robot_id = info.extra.get("robot_id")
            if robot_id is None:
                continue
            r = self._robot(robot_id)
            last = int(
                info.extra.get("seq_end", int(info.extra["seq0"]) + self.store.length(i) - 1)
            )
            r.last_seq = max(r.last_seq, last)
            r.infos[int(info.extra["robot_episode"])] = info.to_dict()
        for robot, r in self.robots.items():
            log.info("ingest: robot %s has seqs up to %d in %s", robot, r.last_seq, self.store.path)

    def _robot(self, robot_id: str) -> _Robot:
        return self.robots.setdefault(robot_id, _Robot())

    def last_seq(self, robot_id: str) -> int:
        return self._robot(robot_id).last_seq

    def apply(self, robot_id: str, items: list[Transition]) -> TransitionAck:
        """Store the new items of one batch (in seq order); the ack covers all of them. The steps
        of one episode are written as one store batch (one commit), flushed before anything
        else of the store changes (an episode's end or begin) and before the ack, so the ack
        never covers an uncommitted step and ``last_seq`` follows the commits only."""
        r = self._robot(robot_id)
        dup, last = 0, r.last_seq
        try:
            for t in sorted(items, key=lambda t: t.seq):
                if t.seq <= last:
                    dup += 1
                    continue
                if t.seq != last + 1:
                    self.stats["gaps"] += 1
                    log.warning(
                        "ingest: robot %s skipped seqs %d..%d (its spool overflowed or was "
                        "deleted)",
                        robot_id,
                        last + 1,
                        t.seq - 1,
                    )
                self._write(robot_id, r, t)
                last = t.seq
            self._flush(robot_id, r)
        finally:
            r.batch.clear()  # a failed store: nothing of it counts as stored, the robot resends
        self.stats["duplicates"] += dup
        r.duplicates += dup
        self.store.root.attrs[LAST_SEQ_ATTR] = {k: v.last_seq for k, v in self.robots.items()}
        return TransitionAck(acked=r.last_seq, duplicates=dup)

    def _open(self, robot_id: str, r: _Robot, t: Transition) -> EpisodeWriter:
        self._flush(robot_id, r)
        if r.writer is not None:  # a new episode while one is open: the robot never ended it
            self._close(r, "aborted", False, None)
        info_d = t.info or r.infos.get(t.episode)
        if info_d is not None:
            info = EpisodeInfo.from_dict(info_d)
        else:  # first step lost its info (should not happen): describe it from the arrays
            step = t.step
            assert step is not None
            layout = StepLayout(
                int(step.state.shape[0]),
                int(step.action.shape[0]),
                {k: v.shape[:2] for k, v in step.images.items()},
            )
            info = EpisodeInfo(task="unknown", layout=layout, source="online")
        continues = t.index > 0 and t.episode in r.infos
        info.extra = {**info.extra, "robot_id": robot_id, "robot_episode": t.episode, "seq0": t.seq}
        info.extra.pop("seq_end", None)
        if continues:
            info.extra["continues"] = True
        r.infos[t.episode] = info.to_dict()
        r.writer, r.episode = self.store.begin(info), t.episode
        r.pending = None
        self.stats["episodes"] += 1
        return r.writer

    def _close(
        self,
        r: _Robot,
        status: str,
        success: bool,
        final: dict[str, np.ndarray] | None,
        seq_end: int | None = None,
    ) -> None:
        w, r.writer = r.writer, None
        if w is None:
            return
        if seq_end is not None:
            w.info.extra["seq_end"] = seq_end
        w.end(status=status, success=success, final=final if final and w.length else None)

    def _write(self, robot_id: str, r: _Robot, t: Transition) -> None:
        """Take one new item: a step joins the turn's batch of its episode (stored by
        :meth:`_flush`), an end closes the episode after its batch is stored."""
        if t.step is not None:
            if r.writer is None or r.episode != t.episode:
                self._open(robot_id, r, t)
            r.batch.append(t)
            if not t.end:
                return
        self._flush(robot_id, r)
        if t.end:
            self._end(robot_id, r, t)
        r.last_seq = t.seq

    def _flush(self, robot_id: str, r: _Robot) -> None:
        """Store the batch of ``r``'s open episode in one commit; only then count its steps as
        stored (``last_seq``) and offer them to the consumer."""
        batch, w = r.batch, r.writer
        if not batch or w is None:
            return
        w.append_steps([_step(t) for t in batch])
        r.batch = []
        r.last_seq = batch[-1].seq
        self.stats["stored"] += len(batch)
        r.stored += len(batch)
        for t in batch:
            self._pair(robot_id, r, t, w.info.source)

    def _end(self, robot_id: str, r: _Robot, t: Transition) -> None:
        """Close the robot's episode ``t.episode`` as ``t`` says and emit its last step."""
        if r.writer is not None and r.episode == t.episode:
            self._close(r, t.end, t.success, t.final, seq_end=t.seq)
        else:
            log.warning(
                "ingest: robot %s ended episode %d (%s), which has no open store episode here",
                robot_id,
                t.episode,
                t.end,
            )
        if r.pending is not None and t.final is not None:
            step = cast(np.ndarray, t.final.get("state"))  # a final observation has its state
            images = {k[len("images/") :]: v for k, v in t.final.items() if k.startswith("images/")}
            self._emit(robot_id, r, _obs(step, images), last=True, success=bool(t.success))
        r.pending = None

    def _pair(self, robot_id: str, r: _Robot, t: Transition, source: str) -> None:
        assert t.step is not None
        if r.pending is not None and r.pending[0].episode == t.episode:
            self._emit(robot_id, r, _obs(t.step.state, t.step.images))
        r.pending = (t, source)
        if t.terminated:  # nothing follows a terminal step: its next observation does not matter
            self._emit(robot_id, r, _obs(t.step.state, t.step.images), last=True)

    def _emit(
        self,
        robot_id: str,
        r: _Robot,
        next_obs: dict[str, Any],
        last: bool = False,
        success: bool | None = None,
    ) -> None:
        pending, r.pending = r.pending, None
        if pending is None or self.emit is None:
            return
        t, source = pending
        s = t.step
        assert s is not None
        self.emit(
            IngestedTransition(
                robot_id,
                t.seq,
                source,
                _obs(s.state, s.images),
                np.asarray(s.action),
                t.reward,
                t.terminated,
                t.truncated,
                s.intervention,
                s.policy_version,
                next_obs,
                t.episode,
                last,
                success,
                t.info,
            )
        )

    def per_robot(self) -> dict[str, dict[str, int]]:
        """Robot id -> steps stored (since this ledger opened), duplicates, last stored seq.
        Safe to call from another thread than the writer's (a snapshot of the robots first)."""
        return {
            k: {"stored": r.stored, "duplicates": r.duplicates, "last_seq": r.last_seq}
            for k, r in list(self.robots.items())
        }

    def close(self) -> None:
        for r in self.robots.values():
            if r.writer is not None:  # the robot continues it after a restart
                self._close(r, "aborted", False, None)


def layout_mismatch(layout: StepLayout, t: Transition) -> str:
    """Why the step of ``t`` does not fit ``layout`` ("" when it does, or when ``t`` has no
    step): the first of state size, action size, camera names and sizes that differs."""
    step = t.step
    if step is None:
        return ""
    state, action = np.shape(step.state), np.shape(step.action)
    if state != (layout.state_dim,):
        return f"state has shape {state}, the learner's layout wants ({layout.state_dim},)"
    if action != (layout.action_dim,):
        return f"action has shape {action}, the learner's layout wants ({layout.action_dim},)"
    if sorted(step.images) != sorted(layout.cameras):
        return f"cameras {sorted(step.images)}, the learner's layout has {sorted(layout.cameras)}"
    for cam, (h, w) in layout.cameras.items():
        got = np.shape(step.images[cam])
        if got != (h, w, 3):
            return f"camera {cam!r} has shape {got}, the learner's layout wants ({h}, {w}, 3)"
    return ""
