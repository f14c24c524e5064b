"""The transition streamer without ROS: spool every item, send it to the learner, forget it on ack.

Delivery: at least once, de-duplicated at the learner by ``(robot_id, seq)``
(``rlinf_data.ingest``). :meth:`TransitionStreamer.put` numbers an item and appends it to the
on-disk :class:`~rlinf_ros.spool.Spool` before returning -- it never blocks on the network, so
the control loop never waits for the learner. A sender thread keeps at most ``window`` items in
flight (back-pressure: an unreachable or slow learner fills the spool, not memory), sends them
in batches, and deletes them from the spool when the cumulative ack covers them. A lost
connection (or no ack within ``ack_timeout_s``) means reconnect with exponential back-off
(capped, jittered) and send again from the first unacknowledged seq; the learner acknowledges
what it already has without storing it twice. A streamer killed with SIGKILL restarts from its
spool: nothing it accepted is lost.

A wrong token is not a lost connection: the ingest answers HTTP 401 (403 where a proxy
forbids), which no retry cures until someone changes a token. The streamer logs that refusal
once, with the keys to match, reports it in its status (``refused``) and retries only every
``backoff_max_s`` without logging again: the wrong token may be the learner's, fixed by
restarting the learner with the robot untouched, and steps keep spooling meanwhile.

A full spool (learner away for long) refuses new items: the episode they belong to is cut --
an ``aborted`` end is queued for it as soon as there is room and its remaining steps are
dropped (counted), so no episode is ever spliced across a hole.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlinf_contracts.transitions import (
    IngestHello,
    IngestWelcome,
    Transition,
    TransitionAck,
    batch_frame,
    encode,
)
from rlinf_contracts.wire import Packer, clip, unpackb
from rlinf_ros.spool import Spool

log = logging.getLogger(__name__)
TOKEN_ENV = "RLINF_INGEST_TOKEN"
REFUSED_STATUSES = (401, 403)  # the ingest refused the token: retrying as is cannot help
TOKEN_HINT = f"streamer.token_file, or ${TOKEN_ENV} / ${TOKEN_ENV}_FILE"


@dataclass
class StreamerConfig:
    url: str = field(
        default="ws://127.0.0.1:8100/transitions", metadata={"help": "learner ingest endpoint"}
    )
    token: str = field(
        default="", metadata={"help": f"bearer token (env {TOKEN_ENV} / {TOKEN_ENV}_FILE)"}
    )
    robot_id: str = field(
        default="robot0", metadata={"help": "names this robot's seqs at the learner"}
    )
    spool_dir: str = field(
        default="runs/spool/robot0", metadata={"help": "on-disk outbox (survives restarts)"}
    )
    spool_max_mb: float = field(
        default=2048.0, metadata={"help": "spool bound; beyond it episodes are cut"}
    )
    segment_mb: float = field(default=4.0, metadata={"help": "spool segment file size"})
    fsync: bool = field(
        default=False, metadata={"help": "fsync each item (power-cut safe, ~ms per item)"}
    )
    window: int = field(default=64, metadata={"help": "items in flight without an ack"})
    batch: int = field(default=16, metadata={"help": "items per frame"})
    backoff_s: float = field(default=0.5, metadata={"help": "first reconnect pause"})
    backoff_max_s: float = field(default=10.0, metadata={"help": "longest reconnect pause"})
    ack_timeout_s: float = field(default=15.0, metadata={"help": "no ack for this long: reconnect"})
    connect_timeout_s: float = field(
        default=5.0, metadata={"help": "WebSocket open + hello timeout"}
    )

    def resolve_token(self) -> str:
        if self.token:
            return self.token
        path = os.environ.get(TOKEN_ENV + "_FILE", "")
        token = Path(path).read_text().strip() if path else os.environ.get(TOKEN_ENV, "")
        if not token:
            raise ValueError(
                f"no ingest token: key 'streamer.stream.token' is empty and {TOKEN_ENV} / "
                f"{TOKEN_ENV}_FILE are unset (in a graph: 'streamer.token_file' or "
                "'streamer.token_env')"
            )
        return token


class TransitionStreamer:
    """``put(item)`` from the robot's thread; ``start()`` the sender; ``stop()`` at exit."""

    def __init__(self, cfg: StreamerConfig, token_hint: str = TOKEN_HINT) -> None:
        self.cfg = cfg
        self._token = cfg.resolve_token()
        self.token_hint = token_hint  # where this robot's token came from, for a refusal
        self.spool = Spool(
            cfg.spool_dir, int(cfg.spool_max_mb * 2**20), int(cfg.segment_mb * 2**20), cfg.fsync
        )
        self._packer = Packer()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._cut: Transition | None = (
            None  # the episode being cut (spool full): its aborted end is owed
        )
        self.acked = -1
        self._max_sent = -1
        self.stats = {
            "put": 0,
            "dropped": 0,
            "sent": 0,
            "resent": 0,
            "acked": -1,
            "connects": 0,
            "failures": 0,
            "duplicates": 0,
        }
        self.connected = False
        self.last_error = ""
        self.refused = ""  # the ingest's refusal of the token, until a connection succeeds
        self._thread = threading.Thread(target=self._run, name="streamer", daemon=True)

    # ---- robot side ------------------------------------------------------------------------------
    def put(self, item: Transition) -> bool:
        """Number ``item`` and spool it; False when it was dropped (spool full). Never blocks
        long."""
        if self._cut is not None:
            owed = self._cut
            if item.episode == owed.episode and not item.end:
                self.stats["dropped"] += 1
                return False
            if self._append(owed) is None:
                self.stats["dropped"] += 1
                return False
            self._cut = None
            if item.episode == owed.episode:  # its own end: already ended as aborted
                return True
        if self._append(item) is None:
            self.stats["dropped"] += 1
            if not item.end:
                self._cut = Transition(seq=0, episode=item.episode, index=item.index, end="aborted")
            log.warning(
                "streamer: spool %s full (%.0f MB); cutting episode %d",
                self.cfg.spool_dir,
                self.cfg.spool_max_mb,
                item.episode,
            )
            return False
        self.stats["put"] += 1
        self._wake.set()
        return True

    def _append(self, item: Transition) -> int | None:
        def frame(seq: int) -> bytes:
            item.seq = seq
            return self._packer.pack(item.to_wire())

        return self.spool.append(frame)

    @property
    def backlog(self) -> int:
        """Items spooled and not yet acknowledged."""
        return max(0, self.spool.next_seq - 1 - self.acked)

    def status(self) -> dict[str, Any]:
        return {
            **self.stats,
            "connected": self.connected,
            "backlog": self.backlog,
            "spool_mb": round(self.spool.bytes / 2**20, 3),
            "next_seq": self.spool.next_seq,
            "last_error": self.last_error,
            "refused": self.refused,
        }

    # ---- sender thread ---------------------------------------------------------------------------
    def start(self) -> TransitionStreamer:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout_s)
        self.spool.close()

    def _connect(self) -> Any:
        from websockets.sync.client import connect

        # __enter__: a long-lived connection this object closes itself (websockets >= 17.1 warns
        # otherwise)
        ws = connect(
            self.cfg.url,
            open_timeout=self.cfg.connect_timeout_s,
            compression=None,
            max_size=2**20,
            additional_headers={"Authorization": f"Bearer {self._token}"},
            close_timeout=2,
        ).__enter__()
        try:
            ws.send(encode(IngestHello(self.cfg.robot_id)))
            frame = ws.recv(timeout=self.cfg.connect_timeout_s)
            welcome = IngestWelcome.from_wire(unpackb(frame))  # type: ignore[arg-type]  # a text frame fails in msgpack, as any bad frame
        except BaseException:
            ws.close()
            raise
        if welcome.last_seq >= self.spool.next_seq:
            self.spool.skip_to(welcome.last_seq + 1)
        self._on_ack(welcome.last_seq)
        return ws

    def _run(self) -> None:
        pause = self.cfg.backoff_s
        while not self._stop.is_set():
            try:
                ws = self._connect()
            except Exception as e:
                refusal = self._refusal(e)
                if refusal:
                    self._refused(refusal)
                    self._stop.wait(self.cfg.backoff_max_s)
                    continue
                self._lost(f"cannot reach {self.cfg.url}: {type(e).__name__}: {clip(str(e), 200)}")
                self._stop.wait(pause * random.uniform(0.8, 1.2))
                pause = min(pause * 2, self.cfg.backoff_max_s)
                continue
            pause = self.cfg.backoff_s
            self.connected, self.last_error, self.refused = True, "", ""
            self.stats["connects"] += 1
            log.info(
                "streamer: connected to %s (learner holds seqs up to %d)", self.cfg.url, self.acked
            )
            try:
                self._pump(ws)
            except Exception as e:
                self._lost(
                    f"connection to {self.cfg.url} lost: {type(e).__name__}: {clip(str(e), 200)}"
                )
            finally:
                ws.close()

    def _refusal(self, e: Exception) -> str:
        """The message for a refused token (HTTP 401 / 403 on the upgrade), "" for any other
        failure."""
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status not in REFUSED_STATUSES:
            return ""
        return (
            f"the ingest at {self.cfg.url} refused this robot's token (HTTP {status}): the "
            f"streamer's token ({self.token_hint}) must equal the learner's ('ingest.token_file', "
            f"or {TOKEN_ENV} / {TOKEN_ENV}_FILE where the learner runs); steps stay spooled, "
            f"retrying every {self.cfg.backoff_max_s:g} s"
        )

    def _refused(self, why: str) -> None:
        if why != self.refused:
            log.error("streamer: %s", why)
        self.connected, self.last_error, self.refused = False, why, why
        self.stats["failures"] += 1

    def _lost(self, why: str) -> None:
        if self.connected or why != self.last_error:
            log.warning("streamer: %s; spooling (backlog %d), retrying", why, self.backlog)
        self.connected, self.last_error = False, why
        self.stats["failures"] += 1

    def _pump(self, ws: Any) -> None:
        """Send within the window, read acks, until stopped or the connection fails."""
        sent = self.acked  # everything above the ack is (re)sent on a new connection
        last_ack_t = time.monotonic()
        while not self._stop.is_set():
            room = self.cfg.window - (sent - self.acked)
            frames = self.spool.read(sent, min(self.cfg.batch, room)) if room > 0 else []
            if frames:
                ws.send(batch_frame(self.cfg.robot_id, [f for _, f in frames]))
                again = sum(1 for seq, _ in frames if seq <= self._max_sent)
                self.stats["resent"] += again
                self.stats["sent"] += len(frames) - again
                sent = frames[-1][0]
                self._max_sent = max(self._max_sent, sent)
                continue
            if sent <= self.acked:  # nothing in flight: wait for new items
                self._wake.wait(0.5)
                self._wake.clear()
                last_ack_t = time.monotonic()
                continue
            try:
                reply = ws.recv(timeout=0.5)
            except TimeoutError:
                if time.monotonic() - last_ack_t > self.cfg.ack_timeout_s:
                    raise TimeoutError(
                        f"no ack within {self.cfg.ack_timeout_s} s for seqs "
                        f"{self.acked + 1}..{sent}"
                    ) from None
                continue
            if isinstance(reply, str):
                raise RuntimeError(f"learner refused a batch: {clip(reply, 300)}")
            ack = TransitionAck.from_wire(unpackb(reply))
            self.stats["duplicates"] += ack.duplicates
            self._on_ack(ack.acked)
            last_ack_t = time.monotonic()

    def _on_ack(self, acked: int) -> None:
        if acked > self.acked:
            self.acked = acked
            self.stats["acked"] = acked
            self.spool.ack(acked)
