"""The learner's ingest in a process of its own, with the embedded ingest's surface.

Why: embedded in the learner's process, the ingest's event loop and store writer and the
learner's updates take turns at one interpreter lock. On two cores that process reaches about
1.2 cores and the learner gets under half of one, so from four robots at 20 Hz the learner trains
on less than the robots send (``benchmarks/results/fleet_ingest.md``). In a process of its own the
ingest has its own interpreter and core; the learner keeps only the unpickling of what it trains on.

What stays the same: every transition is durable in the episode store before its ack, and the
feed is bounded. The child forwards stored transitions in batches over a pipe only while fewer
than ``feed_size`` are in flight to the learner; the rest waits in the child's own feed, which
drops its oldest when full (``dropped_feed``) -- as the embedded feed does, and the store still
holds them for a restart. A child that dies is an error on the learner's next wait for data,
with its exit code, not a learner that waits for ever; a learner that dies (even by SIGKILL)
takes the child with it within a fraction of a second, so a restarted learner finds its port free.

>>> from rlinf_data.ingest_config import IngestConfig
>>> IngestProcess(IngestConfig(store="/tmp/x", token="t")).url
'ws://127.0.0.1:8100/transitions'
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import time
from collections import deque
from typing import Any

from rlinf_data.ingest_config import IngestConfig, IngestedTransition
from rlinf_data.ingest_server import PATH

log = logging.getLogger(__name__)
_BATCH = 256  # most transitions in one pickled message to the learner
_EMPTY_STATUS: dict[str, Any] = {
    "ledger": {"stored": 0, "duplicates": 0, "gaps": 0, "episodes": 0},
    "per_robot": {},
    "queued": {},
    "refused": {},
    "dropped_feed": 0,
    "cpu_s": 0.0,
}


def _log_setup() -> tuple[int, str | None, str | None]:
    """The parent's root log level and format, for the child's lines to look like its own."""
    root = logging.getLogger()
    fmt = next((h.formatter for h in root.handlers if h.formatter is not None), None)
    return root.level, getattr(fmt, "_fmt", None), getattr(fmt, "datefmt", None)


def _serve(
    cfg: IngestConfig,
    layout: Any,
    logs: tuple[int, str | None, str | None],
    out: Any,
    status: Any,
    want: Any,
    started: Any,
    stop: Any,
    inflight: Any,
) -> None:
    """The child: serve the ingest, forward its feed in batches, answer status requests."""
    from rlinf_data.ingest_server import IngestServer

    level, fmt, datefmt = logs
    logging.basicConfig(level=level, format=fmt or logging.BASIC_FORMAT, datefmt=datefmt)
    try:
        srv = IngestServer(cfg, layout=layout).start()
    except OSError as e:  # port taken, address not on this machine
        started.put(("error", str(e)))
        return
    started.put(("ok", srv.port))
    parent = os.getppid()
    try:
        while not stop.is_set() and os.getppid() == parent:  # a killed learner: stop too
            room = min(_BATCH, cfg.feed_size - inflight.value)
            batch: list[IngestedTransition] = []
            if room > 0:
                try:
                    batch.append(srv.feed.get(timeout=0.05))
                    while len(batch) < room:
                        batch.append(srv.feed.get_nowait())
                except queue.Empty:
                    pass
            else:
                stop.wait(0.01)  # the learner is behind: the child's own feed holds the rest
            if batch:
                with inflight.get_lock():
                    inflight.value += len(batch)
                out.put(batch)
            if want.is_set():  # on request only: a pipe of unread snapshots would go stale
                want.clear()
                status.put({**srv.status(), "cpu_s": sum(os.times()[:2])})
    finally:
        srv.stop()
        status.put({**srv.status(), "cpu_s": sum(os.times()[:2])})


class _Feed:
    """The learner's end of the feed: ``get`` / ``get_nowait`` / ``qsize`` as on the embedded
    ingest's ``queue.Queue``. ``qsize`` counts the transitions in flight from the child too (what
    waits for the learner), so, as with ``queue.Queue``, a drain of ``qsize()`` items stops at
    ``queue.Empty``: ``get_nowait`` never waits for a batch still in the pipe (the child may be
    busy storing; the learner has updates to run meanwhile)."""

    def __init__(self, owner: IngestProcess) -> None:
        self._owner = owner
        self._local: deque[IngestedTransition] = deque()

    def get(self, block: bool = True, timeout: float | None = None) -> IngestedTransition:
        if not self._local:
            try:
                batch = self._owner._out.get(block, timeout)
            except queue.Empty:
                self._owner.check_alive()
                raise
            with self._owner._inflight.get_lock():
                self._owner._inflight.value -= len(batch)
            self._local.extend(batch)
        return self._local.popleft()

    def get_nowait(self) -> IngestedTransition:
        return self.get(False)

    def qsize(self) -> int:
        return len(self._local) + int(self._owner._inflight.value)


class IngestProcess:
    """An :class:`~rlinf_data.ingest_server.IngestServer` in a child process: ``start()`` /
    ``stop()``, ``url``, ``feed`` and ``status()`` as the embedded one has them."""

    def __init__(self, cfg: IngestConfig, layout: Any = None) -> None:
        self.cfg = cfg.resolve()
        self.layout = layout
        self.port = self.cfg.port
        ctx = mp.get_context("spawn")  # no fork of a learner holding torch threads and sockets
        self._out = ctx.Queue()
        self._status_q = ctx.Queue()
        self._want = ctx.Event()
        self._started = ctx.Queue()
        self._stop = ctx.Event()
        self._inflight = ctx.Value("q", 0)
        self._proc = ctx.Process(
            target=_serve,
            args=(
                self.cfg,
                layout,
                _log_setup(),
                self._out,
                self._status_q,
                self._want,
                self._started,
                self._stop,
                self._inflight,
            ),
            name="rlinf-ingest",
            daemon=True,
        )
        self._status = dict(_EMPTY_STATUS)
        self._closed = False
        self.feed = _Feed(self)

    def start(self, timeout_s: float = 60.0) -> IngestProcess:
        self._proc.start()
        try:
            kind, value = self._started.get(timeout=timeout_s)
        except queue.Empty:
            self._proc.terminate()
            raise RuntimeError(
                f"the ingest process did not start within {timeout_s:.0f} s "
                f"(exit code {self._proc.exitcode})"
            ) from None
        if kind == "error":
            self._proc.join(5)
            raise OSError(value)
        self.port = int(value)
        log.info("ingest: in its own process (pid %d)", self._proc.pid)
        return self

    @property
    def url(self) -> str:
        return f"ws://{self.cfg.host}:{self.port}{PATH}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def check_alive(self) -> None:
        """Raise when the child ended without being asked to (killed, crashed)."""
        code = self._proc.exitcode
        if code is not None and not self._stop.is_set():
            raise RuntimeError(
                f"the ingest process exited with code {code}; robots can no longer stream "
                "(its log lines above say why)"
            )

    def status(self) -> dict[str, Any]:
        """The child's status now (see ``IngestServer.status``), plus its CPU seconds
        ``cpu_s``: asked for and answered within one turn of its loop (tens of ms); after
        :meth:`stop`, its last."""
        if self._closed:
            return self._status
        self._drain_status()
        if self._proc.is_alive():
            self._want.set()
            try:
                self._status = self._status_q.get(timeout=5.0)
            except queue.Empty:
                log.warning("ingest process did not answer a status request within 5 s")
        return self._status

    def _drain_status(self) -> None:
        while True:
            try:
                self._status = self._status_q.get_nowait()
            except queue.Empty:
                return

    @property
    def dropped_feed(self) -> int:
        return int(self.status()["dropped_feed"])

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._proc.pid is None:
            return
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        while self._proc.is_alive() and time.monotonic() < deadline:
            self._drain_status()  # keep the pipes drained: a child blocked on one never exits
            try:
                self._out.get(timeout=0.05)
            except queue.Empty:
                pass
        if self._proc.is_alive():
            log.warning("ingest process still running after %.0f s; terminating it", timeout_s)
            self._proc.terminate()
        self._proc.join(5)
        self._drain_status()  # the child's last word: its status after the ingest stopped
        for q in (self._out, self._status_q, self._started):
            q.close()
            q.cancel_join_thread()
        self._closed = True

    def __enter__(self) -> IngestProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
