"""The ingest's websocket server: ``IngestServer`` (auth gate, hello/ack protocol, fair drain).

Split out of :mod:`rlinf_data.ingest` so the network side -- the event-loop thread, the bearer
token gate, the per-connection protocol, the layout refusal and the round-robin turns at the one
store-writer thread -- sits apart from the bookkeeping it drives
(:class:`~rlinf_data.ingest_ledger.Ledger`). Re-exported by :mod:`rlinf_data.ingest`.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

from rlinf_contracts.episode import StepLayout
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
from rlinf_data.ingest_config import IngestConfig, IngestedTransition
from rlinf_data.ingest_ledger import Ledger, layout_mismatch
from rlinf_data.store import EpisodeStore

log = logging.getLogger("rlinf_data.ingest")  # the name the ingest always logged under
# the end of every layout refusal: how robots of different specs feed this learner after all
SHARED_SPEC_HINT = (
    "robots of different specs share one learner through a shared spec "
    "(`rlinf spec --shared ROBOT_A ROBOT_B ...` prints the spec each robot runs)"
)


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
        reason = f"robot {robot} refused: its {why}; {SHARED_SPEC_HINT}"
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

    def status(self) -> dict[str, Any]:
        """What a learner reports of its ingest, as plain data (the same from
        :class:`~rlinf_data.ingest_process.IngestProcess`): the ledger's counts, per robot what
        it stored and its last seq, what each robot has queued, why a robot was refused, and the
        feed's drops. Safe from any thread (snapshots)."""
        return {
            "ledger": dict(self.ledger.stats),
            "per_robot": self.ledger.per_robot(),
            "queued": dict(self.queued),
            "refused": dict(self.refused),
            "dropped_feed": self.dropped_feed,
        }

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
