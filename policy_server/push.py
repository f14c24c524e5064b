"""Learner -> policy server weight push over the wire (``/weights``, shared-token auth).

The learner calls :func:`push_weights` (one shot) or keeps a :class:`WeightPusher` open across
iterations. The server applies the weights between two batches and answers with a
:class:`~policy_server.messages.WeightAck` once the new version is serving.
:class:`BackgroundPusher` does the same from its own thread for a learner that must never wait
on the server (online RL: the server may start after the learner, restart, or be slow): the
learner offers its newest weights, the thread sends the newest offered (older unsent ones are
replaced, never queued), reconnecting with back-off while the server is away.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import websockets

from policy_server.client import open_sync
from policy_server.config import WEIGHTS_TOKEN_ENV
from policy_server.messages import ServerMetadata, WeightAck, WeightPush
from rlinf_contracts.weight_blob import weights_to_bytes
from rlinf_contracts.wire import packb, unpackb

log = logging.getLogger(__name__)


class WeightPushError(RuntimeError):
    """The server refused the push (auth, stale version, weights that do not fit) or is
    unreachable."""


def weights_url(url: str) -> str:
    """``ws://host:port`` or ``ws://host:port/`` -> ``ws://host:port/weights``.

    >>> weights_url("ws://10.0.0.2:8000/")
    'ws://10.0.0.2:8000/weights'
    """
    url = url.rstrip("/")
    return url if url.endswith("/weights") else url + "/weights"


def _to_bytes(weights: Any) -> bytes:
    """safetensors bytes as given, or a state dict (torch tensors / numpy arrays) encoded by the
    one weight serialiser, :func:`rlinf_contracts.weight_blob.weights_to_bytes`."""
    if isinstance(weights, (bytes, bytearray)):
        return bytes(weights)
    return weights_to_bytes(weights)


FRAGMENT_BYTES = 1 << 18  # larger pushes go out in 256 KiB fragments
REPORT_EVERY_S = 60.0  # BackgroundPusher: one summary line per minute, not one per push


def _fragments(frame: bytes) -> Iterator[bytes]:
    """One message in fragments: the server's event loop, which also answers robots, then takes
    one small read at a time instead of one long one (benchmarks/ros_online.py: a 17 MB push
    sent whole stalled more control periods than the same push in fragments)."""
    view = memoryview(frame)
    for i in range(0, len(frame), FRAGMENT_BYTES):
        yield bytes(view[i : i + FRAGMENT_BYTES])


class WeightPusher:
    """A persistent authenticated connection to a server's ``/weights`` path."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 120.0) -> None:
        token = token or os.environ.get(WEIGHTS_TOKEN_ENV)
        if not token:
            raise WeightPushError(f"no weights token: pass token=... or set {WEIGHTS_TOKEN_ENV}")
        self.url, self.timeout_s = weights_url(url), timeout_s
        try:
            self._ws = open_sync(
                self.url,
                open_timeout=timeout_s,
                additional_headers={"Authorization": f"Bearer {token}"},
                max_size=None,
                compression=None,
            )
        except websockets.InvalidStatus as e:
            body = (e.response.body or b"").decode(errors="replace").strip()
            raise WeightPushError(
                f"{self.url} refused the push connection: HTTP {e.response.status_code} {body}"
            ) from None
        except (OSError, TimeoutError, websockets.InvalidHandshake) as e:
            raise WeightPushError(f"cannot reach policy server at {self.url}: {e}") from None
        hello = self._ws.recv(timeout=timeout_s)
        if isinstance(hello, str):  # a text frame is an error message, as in push()
            raise WeightPushError(hello)
        self.metadata = ServerMetadata.from_wire(unpackb(hello))

    def push(self, weights: Any, version: int | None = None) -> WeightAck:
        """Send a state dict (or safetensors bytes); returns once the version is serving."""
        frame = packb(WeightPush(data=_to_bytes(weights), version=version).to_wire())
        try:
            self._ws.send(_fragments(frame) if len(frame) > FRAGMENT_BYTES else frame)
            reply = self._ws.recv(timeout=self.timeout_s)
        except (websockets.ConnectionClosed, TimeoutError) as e:
            raise WeightPushError(f"weight push to {self.url} got no ack: {e}") from None
        if isinstance(reply, str):
            raise WeightPushError(reply)
        ack = WeightAck.from_wire(unpackb(reply))
        log.debug(
            "pushed weight version %d to %s (load %.1f ms)", ack.version, self.url, ack.load_ms
        )
        return ack

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> WeightPusher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def push_weights(
    url: str,
    weights: Any,
    *,
    version: int | None = None,
    token: str | None = None,
    timeout_s: float = 120.0,
) -> WeightAck:
    """One-shot push of a state dict (or safetensors bytes) to the server at ``url``."""
    with WeightPusher(url, token=token, timeout_s=timeout_s) as pusher:
        ack = pusher.push(weights, version=version)
    log.info("pushed weight version %d to %s (load %.1f ms)", ack.version, pusher.url, ack.load_ms)
    return ack


def resolve_token(token: str | None = None, token_file: str | None = None) -> str:
    """The weights token: ``token``, else ``token_file``, else ``RLINF_WEIGHTS_TOKEN(_FILE)``."""
    if token:
        return token
    path = token_file or os.environ.get(WEIGHTS_TOKEN_ENV + "_FILE", "")
    if path:
        try:
            token = Path(path).read_text().strip()
        except OSError as e:
            raise WeightPushError(f"weights token file {path!r} unreadable: {e}") from None
    token = token or os.environ.get(WEIGHTS_TOKEN_ENV, "")
    if not token:
        raise WeightPushError(
            f"no weights token: set push.token_file, {WEIGHTS_TOKEN_ENV} or "
            f"{WEIGHTS_TOKEN_ENV}_FILE"
        )
    return token


class BackgroundPusher:
    """Push the newest offered weights from a thread; :meth:`offer` never blocks on the network.

    ``offer(state)`` keeps only the newest state (a push in progress finishes first). Versions are
    left to the server (``version=None``: its current + 1), so a restarted learner never sends a
    version the server calls stale. ``stats``: pushes, failures, the version serving, last error.
    """

    def __init__(
        self,
        url: str,
        token: str,
        timeout_s: float = 30.0,
        backoff_s: float = 0.5,
        backoff_max_s: float = 10.0,
    ) -> None:
        self.url, self._token, self.timeout_s = weights_url(url), token, timeout_s
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self._slot: Any = None
        self._cond = threading.Condition()
        self._stop = False
        self._sending = False  # a taken item is being pushed (or waits to be retried)
        self.stats: dict[str, Any] = {
            "offered": 0,
            "pushes": 0,
            "failures": 0,
            "version": -1,
            "last_error": "",
        }
        self._reported_at: float | None = None  # when _report last logged (None: never)
        self._reported_pushes = 0
        self._thread = threading.Thread(target=self._run, name="weight-pusher", daemon=True)

    def start(self) -> BackgroundPusher:
        self._thread.start()
        return self

    def offer(self, weights: Any) -> None:
        """Hand over a state dict (already detached / copied by the caller) or safetensors bytes."""
        with self._cond:
            self._slot = weights
            self.stats["offered"] += 1
            self._cond.notify()

    @property
    def version(self) -> int:
        """The weight version the server acknowledged last (-1 before the first push)."""
        return int(self.stats["version"])

    def _take(self) -> Any:
        with self._cond:
            while self._slot is None and not self._stop:
                self._cond.wait(0.5)
            item, self._slot = self._slot, None
            self._sending = item is not None
            return item

    def _report(self, ack: WeightAck) -> None:
        """The first push, then one line per ``REPORT_EVERY_S`` with what changed since: a
        learner pushes every few seconds, and a line per push would bury everything else."""
        now = time.monotonic()
        since = self.stats["pushes"] - self._reported_pushes
        if self._reported_at is not None and now - self._reported_at < REPORT_EVERY_S:
            return
        log.info(
            "weights to %s: version %d serving (load %.1f ms); %d pushes%s",
            self.url,
            ack.version,
            ack.load_ms,
            since,
            "" if self._reported_at is None else f" in the last {now - self._reported_at:.0f} s",
        )
        self._reported_at, self._reported_pushes = now, self.stats["pushes"]

    def _run(self) -> None:
        pusher: WeightPusher | None = None
        pause = self.backoff_s
        while not self._stop:
            item = self._take()
            if item is None:
                continue
            try:
                if pusher is None:
                    pusher = WeightPusher(self.url, token=self._token, timeout_s=self.timeout_s)
                ack = pusher.push(item)
                self.stats.update(pushes=self.stats["pushes"] + 1, version=ack.version)
                self._report(ack)
                self._sending = False
                pause = self.backoff_s
            except (WeightPushError, OSError) as e:
                self.stats.update(failures=self.stats["failures"] + 1, last_error=str(e))
                if self.stats["failures"] == 1 or self.stats["failures"] % 20 == 0:
                    log.warning(
                        "weight push to %s failed (%d so far; retrying): %s",
                        self.url,
                        self.stats["failures"],
                        e,
                    )
                if pusher is not None:
                    pusher.close()
                    pusher = None
                with self._cond:  # keep the weights unless newer ones came meanwhile
                    if self._slot is None:
                        self._slot = item
                    self._sending = False
                    self._cond.wait(pause)
                pause = min(self.backoff_max_s, pause * 2)
        if pusher is not None:
            pusher.close()

    def flush(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the newest offered weights to be served; True if they
        were."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._cond:
                if self._slot is None and not self._sending:
                    return True
            time.sleep(0.05)
        return False

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout_s)
