"""Learner ingest: ``ws://host:port/transitions`` -> episode store -> the replay buffer's feed.

Robots (the streamer node, ``rlinf_ros.streaming``) send
:class:`~rlinf_contracts.transitions.TransitionBatch` frames; every item is written to the
:class:`~rlinf_data.store.EpisodeStore` *before* the cumulative
:class:`~rlinf_contracts.transitions.TransitionAck` goes back, so a robot forgets only what is
durable. Items carry a per-robot sequence number; one already stored (sent again after a reconnect
or a learner restart) is acknowledged and not written twice. After each write the transition
(observation, action, reward, done flags, next observation) is offered to a consumer
(``on_transition`` callback and/or the bounded ``IngestServer.feed`` queue) -- the off-policy runner
reads it into its replay buffer; after a restart it restores the buffer from the store.

Where seqs live on disk: each store episode's ``info.extra`` holds ``robot_id``,
``robot_episode``, ``seq0`` (seq of its first step; steps of one episode have consecutive seqs)
and, once ended, ``seq_end``; the root attribute ``ingest_last_seq`` holds each robot's last
acknowledged seq (written after the steps, so it is never ahead of them). That is the whole
de-duplication state: it is rebuilt from the store on restart, each step's seq is committed with
the step itself (the steps of one episode in one turn are one batch, one atomic write:
:meth:`~rlinf_data.store.EpisodeWriter.append_steps`), so after a kill at any point the ledger
holds exactly the stored seqs -- a resent item is either stored or a duplicate, never both.
A learner killed with SIGKILL loses at most the batch in flight, which was not acknowledged and is
sent again. ``IngestConfig.fsync`` makes the same hold across a power cut. An episode interrupted
by a learner restart continues in a new store episode (``extra.continues``).

Many robots, one store writer: every connection takes turns at the single store-writer thread
(see :class:`IngestServer`), so a robot that floods cannot starve the others. A learner that knows
its step layout passes it (``IngestServer(layout=...)``) and a robot streaming another layout is
refused with the reason before anything of it is stored.

ROS-free and torch-free (numpy, zarr, websockets), so the learner imports it anywhere.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, cast

import numpy as np

from rlinf_contracts.episode import EpisodeInfo, Step, StepLayout
from rlinf_contracts.server_logs import quiet_library_log
from rlinf_contracts.transitions import (
    PATH,
    IngestHello,
    IngestWelcome,
    Transition,
    TransitionAck,
    TransitionBatch,
    TransitionError,
    encode,
)
from rlinf_contracts.wire import WireError, clip, unpackb
from rlinf_data.store import EpisodeStore, EpisodeWriter

log = logging.getLogger(__name__)
TOKEN_ENV = "RLINF_INGEST_TOKEN"
LAST_SEQ_ATTR = "ingest_last_seq"


@dataclass
class IngestConfig:
    store: str = field(
        default="", metadata={"help": "episode store directory the transitions go to"}
    )
    host: str = field(
        default="127.0.0.1", metadata={"help": "bind address (0.0.0.0 to accept robots)"}
    )
    port: int = field(default=8100, metadata={"help": "TCP port; 0 picks a free one"})
    token: str = field(
        default="", metadata={"help": f"bearer token robots must send (env {TOKEN_ENV} / _FILE)"}
    )
    max_frame_bytes: int = field(
        default=64 << 20, metadata={"help": "largest accepted batch frame"}
    )
    feed_size: int = field(
        default=100_000, metadata={"help": "transitions the feed queue holds (oldest dropped)"}
    )
    hello_timeout_s: float = field(
        default=10.0, metadata={"help": "a connection must say hello within this"}
    )
    turn_items: int = field(
        default=16,
        metadata={
            "help": "most transitions of one robot stored per turn of the store writer before "
            "the other robots' batches get theirs (fair drain)"
        },
    )
    fsync: bool = field(
        default=False,
        metadata={
            "help": "flush each stored step to the disk before its ack (survives a power cut; "
            "costs ms per step, see benchmarks/results/store_durability.md); off: "
            "survives kill -9 only"
        },
    )

    def resolve(self) -> IngestConfig:
        """Fill the token from ``RLINF_INGEST_TOKEN_FILE`` / ``RLINF_INGEST_TOKEN``; validate."""
        if not self.token:
            path = os.environ.get(TOKEN_ENV + "_FILE", "")
            self.token = Path(path).read_text().strip() if path else os.environ.get(TOKEN_ENV, "")
        if not self.token:
            raise ValueError(
                f"key 'ingest.token' is empty: set it, {TOKEN_ENV} or {TOKEN_ENV}_FILE "
                "(robots authenticate with 'Authorization: Bearer <token>')"
            )
        if not self.store:
            raise ValueError("key 'ingest.store' is empty: name the episode store directory")
        if self.turn_items < 1:
            raise ValueError(f"key 'ingest.turn_items' must be >= 1, got {self.turn_items}")
        return self


@dataclass
class IngestedTransition:
    """What the replay buffer needs of one stored step (``next_obs``: the observation after it)."""

    robot_id: str
    seq: int
    source: str
    obs: dict[str, Any]  # {"state": [D], "images": {cam: HxWx3}}
    action: np.ndarray
    reward: float
    terminated: bool
    truncated: bool
    intervention: bool
    policy_version: int
    next_obs: dict[str, Any]
    episode: int = -1  # the robot's episode number (its steps have consecutive seqs)
    last: bool = (
        False  # the episode's last step: nothing of it follows (terminal, or its end arrived)
    )
    success: bool | None = None  # the end's success flag when ``last`` came with one, else unknown
    info: dict[str, Any] | None = None  # the episode's info as streamed (its first step only)


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


class IngestServer:
    """``ws://host:port/transitions`` on its own event-loop thread. ``start()`` / ``stop()``;
    ``feed`` is a bounded queue of :class:`IngestedTransition` (the oldest dropped when full).

    Fairness when one robot floods -- a fair round-robin drain, not a per-robot cap. Every store
    write goes through one writer thread (one writer per store), whose queue is first come,
    first served. A connection reads its next frame only after the previous batch is stored and
    acknowledged, so each robot has at most one job in that queue, and a job stores at most
    ``turn_items`` transitions: the rest of a larger batch queues again behind every other
    robot's job. With N robots waiting, each gets one turn of ``<= turn_items`` per cycle, so a
    robot that floods (huge batches, wide window) takes at most its 1/N of the writer while the
    others have data. Why not a per-robot cap on queued-but-not-stored transitions: a cap must
    refuse or drop what is over it, and dropping breaks store-before-ack (the robot would resend,
    or lose, what it was told nothing about); the round-robin keeps every transition and bounds
    memory anyway -- what a robot has queued here is at most one frame being stored plus the
    websocket's receive queue (``max_queue`` frames); beyond that TCP pushes back to the robot's
    window and its on-disk spool. ``queued`` shows, per robot, the transitions received and not
    yet stored.

    Heterogeneous robots: with ``layout`` (the learner's step layout) every step is checked
    before it is stored; a robot whose state / action / camera layout differs is refused -- its
    batch is answered with the reason as text and its connection closed (code 1008) with that
    reason, and ``refused`` keeps it per robot. The hello carries only ``robot_id`` and the
    protocol, so a robot's first step is the earliest point its layout is known; nothing of a
    refused robot reaches the store. It is checked again on every connection, so a robot
    restarted with the right layout is accepted.
    """

    def __init__(
        self,
        cfg: IngestConfig,
        on_transition: Callable[[IngestedTransition], None] | None = None,
        layout: StepLayout | None = None,
    ) -> None:
        self.cfg = cfg.resolve()
        self.layout = layout
        self.queued: dict[str, int] = {}  # robot id -> transitions received, not yet stored
        self.refused: dict[str, str] = {}  # robot id -> why its last batch was refused
        self.feed: queue.Queue[IngestedTransition] = queue.Queue(maxsize=cfg.feed_size)
        self.dropped_feed = 0
        self._callback = on_transition
        self.store = EpisodeStore(cfg.store, mode="a", fsync=cfg.fsync)
        self.ledger = Ledger(self.store, self._offer)
        self._io = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="ingest-store"
        )  # one store writer
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ingest", daemon=True)
        self._server: Any = None
        self._current: dict[str, Any] = {}  # robot id -> its live connection
        self.port = cfg.port

    # ---- consumer ---------------------------------------------------------------------------
    def _offer(self, item: IngestedTransition) -> None:
        if self._callback is not None:
            self._callback(item)
        while True:
            try:
                self.feed.put_nowait(item)
                return
            except queue.Full:
                try:
                    self.feed.get_nowait()
                    self.dropped_feed += 1
                except queue.Empty:
                    pass

    # ---- HTTP edge ----------------------------------------------------------------------------
    def _gate(self, conn: Any, request: Any) -> Any:
        from urllib.parse import urlsplit

        path = urlsplit(request.path).path
        if path == "/healthz":
            return conn.respond(HTTPStatus.OK, "ok\n")
        if path != PATH:
            return conn.respond(
                HTTPStatus.NOT_FOUND, f"no such path {clip(path)}; robots use {PATH}\n"
            )
        value = request.headers.get("Authorization", "")
        sent = value[len("Bearer ") :].strip() if value.startswith("Bearer ") else ""
        if not sent or not hmac.compare_digest(sent.encode(), self.cfg.token.encode()):
            log.warning(
                "ingest: refused a connection from %s: missing or wrong bearer token",
                conn.remote_address,
            )
            return conn.respond(
                HTTPStatus.UNAUTHORIZED, "transitions need 'Authorization: Bearer <token>'\n"
            )
        return None

    async def _handle(self, ws: Any) -> None:
        try:
            hello = IngestHello.from_wire(
                unpackb(await asyncio.wait_for(ws.recv(), self.cfg.hello_timeout_s))
            )
        except (TimeoutError, WireError, TransitionError) as e:
            await ws.close(1008, f"expected an ingest hello first: {clip(str(e), 200)}")
            return
        robot = hello.robot_id
        old = self._current.get(robot)
        if old is not None:  # a reconnect while the old socket lingers half-open: newest wins
            await old.close(1001, "superseded by a newer connection of this robot")
        self._current[robot] = ws
        loop = asyncio.get_running_loop()
        last = await loop.run_in_executor(self._io, self.ledger.last_seq, robot)
        await ws.send(encode(IngestWelcome(robot, last)))
        log.info(
            "ingest: robot %s connected from %s (stored up to seq %d)",
            robot,
            ws.remote_address,
            last,
        )
        try:
            async for frame in ws:
                try:
                    batch = TransitionBatch.from_wire(unpackb(frame))
                except (WireError, TransitionError) as e:
                    await ws.send(f"bad transition batch: {clip(str(e), 900)}")
                    continue
                if self._current.get(robot) is not ws:
                    break
                why = self._mismatch(batch.items)
                if why:
                    await self._refuse(ws, robot, why)
                    break
                ack = await self._store(loop, robot, batch.items)
                await ws.send(encode(ack))
        except Exception as e:
            log.warning(
                "ingest: robot %s connection ended: %s: %s",
                robot,
                type(e).__name__,
                clip(str(e), 200),
            )
        finally:
            if self._current.get(robot) is ws:
                del self._current[robot]

    def _mismatch(self, items: list[Transition]) -> str:
        if self.layout is None:
            return ""
        for t in items:
            why = layout_mismatch(self.layout, t)
            if why:
                return why
        return ""

    async def _refuse(self, ws: Any, robot: str, why: str) -> None:
        reason = f"robot {robot} refused: its {why}"
        if self.refused.get(robot) != reason:
            log.error("ingest: %s; nothing of it is stored", reason)
        self.refused[robot] = reason
        await ws.send(reason)
        await ws.close(1008, clip(reason, 120))

    async def _store(
        self, loop: asyncio.AbstractEventLoop, robot: str, items: list[Transition]
    ) -> TransitionAck:
        """Store ``items`` in turns of ``cfg.turn_items`` (see the class docstring); one ack."""
        self.queued[robot] = self.queued.get(robot, 0) + len(items)
        self.refused.pop(robot, None)
        items = sorted(items, key=lambda t: t.seq)
        step, duplicates = self.cfg.turn_items, 0
        ack: TransitionAck | None = None
        try:
            for i in range(0, max(1, len(items)), step):  # an empty batch: one ack
                part = items[i : i + step]
                done = await loop.run_in_executor(self._io, self.ledger.apply, robot, part)
                duplicates += done.duplicates
                ack = done
                self.queued[robot] -= len(part)
        finally:
            self.queued[robot] = 0
        assert ack is not None  # the loop ran at least once
        return TransitionAck(acked=ack.acked, duplicates=duplicates)

    # ---- lifecycle ----------------------------------------------------------------------------
    async def _start(self) -> None:
        from websockets.asyncio.server import serve

        self._server = await serve(
            self._handle,
            self.cfg.host,
            self.cfg.port,
            process_request=self._gate,
            max_size=self.cfg.max_frame_bytes,
            ping_interval=20,
            ping_timeout=60,
            close_timeout=5,
            compression=None,
            logger=quiet_library_log(),
        )  # each /healthz poll: no INFO line
        self.port = self._server.sockets[0].getsockname()[1]

    def start(self, timeout_s: float = 30.0) -> IngestServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout_s)
        log.info(
            "ingest: serving ws://%s:%d%s into %s", self.cfg.host, self.port, PATH, self.store.path
        )
        return self

    @property
    def url(self) -> str:
        return f"ws://{self.cfg.host}:{self.port}{PATH}"

    def stop(self, timeout_s: float = 10.0) -> None:
        async def shutdown() -> None:
            self._server.close()
            await self._server.wait_closed()

        if self._server is not None:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout_s)
        self._io.submit(self.ledger.close).result(timeout_s)
        self._io.shutdown(wait=True)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)

    def __enter__(self) -> IngestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m rlinf_data.ingest --store DIR [--host H] [--port P]``: ingest alone (token from
    env)."""
    import argparse
    import signal

    p = argparse.ArgumentParser(prog="python -m rlinf_data.ingest", description=main.__doc__)
    p.add_argument("--store", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8100)
    p.add_argument(
        "--fsync",
        action="store_true",
        help=IngestConfig.__dataclass_fields__["fsync"].metadata["help"],
    )
    a = p.parse_args(argv)
    logging.basicConfig(
        level="INFO", format="%(asctime)s ingest %(levelname)s %(name)s: %(message)s"
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with IngestServer(IngestConfig(store=a.store, host=a.host, port=a.port, fsync=a.fsync)) as srv:
        print(f"listening {srv.url}", flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
