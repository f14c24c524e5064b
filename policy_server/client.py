"""Clients of the policy server: synchronous (robot loops, sim eval) and asyncio.

Why our own and not only ``openpi-client``: a robot must survive a server restart or a network
blip. These clients reconnect with exponential back-off and resend the request in flight
(inference is idempotent), time out every wait with a message naming the server, and raise
:class:`PolicyRequestError` for a request the server rejected (the connection stays usable).

By default (``retries=None``) they keep retrying until the server is back or :meth:`stop` is
called from another thread (then :class:`ClientStopped`); an outage never raises into the
caller's loop, it only delays the answer. The warnings are rate-limited (a robot may retry for
hours). ``retries=N`` gives up after N retries with :class:`PolicyServerUnavailable`. A spec
refusal (HTTP 409, :class:`SpecRefused`) is final and never retried.
Wire-compatible with any openpi server too: they only need the metadata frame and
``actions`` in the response.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import websockets
import websockets.asyncio.client
import websockets.sync.client

from policy_server.messages import MessageError, ServerMetadata
from policy_server.ratelimit import RateLimitedLog
from policy_server.spec_check import SPEC_HEADER, policy_header
from rlinf_contracts.spec import RobotSpec
from rlinf_contracts.wire import Packer, unpackb

log = logging.getLogger(__name__)
limited = RateLimitedLog(log, burst=3, period_s=30.0)

_RETRYABLE = (
    websockets.ConnectionClosed,
    websockets.InvalidHandshake,
    OSError,
    TimeoutError,
    EOFError,
)


class PolicyClientError(RuntimeError):
    """Base class of client errors."""


class PolicyRequestError(PolicyClientError):
    """The server answered with an error text frame (bad request, or inference error)."""


class PolicyServerUnavailable(PolicyClientError):
    """The server could not be reached within the retry budget."""


class ClientStopped(PolicyClientError):
    """:meth:`stop` was called while the client waited for the server."""


class SpecRefused(PolicyClientError):
    """The server's policy was trained for another robot spec (HTTP 409 on connect). Final:
    retrying cannot help; the message names both layouts."""


def _refused(e: BaseException) -> SpecRefused | None:
    """The :class:`SpecRefused` a failed handshake means, if it was a spec refusal."""
    if isinstance(e, websockets.InvalidStatus) and e.response.status_code == 409:
        body = (e.response.body or b"").decode(errors="replace").strip()
        return SpecRefused(body or "policy server refused this robot spec (HTTP 409)")
    return None


def backoff_delays(base_s: float, max_s: float, retries: int | None) -> Iterator[float]:
    """Exponential back-off: ``base, 2 base, 4 base, ...`` capped at ``max_s``; ``retries``
    values, or without end for ``None``.

    >>> list(backoff_delays(0.1, 0.5, 4))
    [0.1, 0.2, 0.4, 0.5]
    >>> import itertools; list(itertools.islice(backoff_delays(1.0, 3.0, None), 5))
    [1.0, 2.0, 3.0, 3.0, 3.0]
    """
    delay, n = base_s, 0
    while retries is None or n < retries:
        yield min(delay, max_s)
        delay, n = min(delay * 2, max_s), n + 1


def parse_metadata(frame: Any) -> ServerMetadata | dict[str, Any]:
    """Typed metadata from one of our servers; the raw map from any other openpi server."""
    raw = unpackb(frame)
    try:
        return ServerMetadata.from_wire(raw)
    except MessageError:
        return raw if isinstance(raw, dict) else {}


def decode_response(frame: Any) -> dict[str, Any]:
    if isinstance(frame, str):
        raise PolicyRequestError(frame)
    out = unpackb(frame)
    if not isinstance(out, dict) or "actions" not in out:
        raise PolicyClientError(f"server response has no 'actions': {type(out).__name__}")
    return out


def open_sync(url: str, **kwargs: Any) -> websockets.sync.client.ClientConnection:
    """``websockets.sync.client.connect`` for a long-lived connection owned by an object.

    ``__enter__`` marks the connection as managed (websockets >= 17.1 warns otherwise); the
    owner closes it explicitly.
    """
    return websockets.sync.client.connect(url, **kwargs).__enter__()


def _headers(api_key: str | None, robot_spec: RobotSpec | None) -> dict[str, str] | None:
    headers = {"Authorization": f"Api-Key {api_key}"} if api_key else {}
    if robot_spec is not None:
        headers[SPEC_HEADER] = policy_header(robot_spec)
    return headers or None


class _ClientSettings:
    """Connection settings and state shared by the blocking and the asyncio client."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        retries: int | None = None,
        backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        robot_spec: RobotSpec | None = None,
    ) -> None:
        self.url, self.api_key, self.robot_spec = url, api_key, robot_spec
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self.retries, self.backoff_s, self.max_backoff_s = retries, backoff_s, max_backoff_s
        self.metadata: ServerMetadata | dict[str, Any] = {}
        self.reconnects = 0
        self._ws: Any = None
        self._packer = Packer()
        self._stopped = threading.Event()

    def stop(self) -> None:
        """Tell a client waiting for the server to give up (thread-safe): its call raises
        :class:`ClientStopped` at the next retry."""
        self._stopped.set()

    def _delays(self) -> Iterator[float]:
        return itertools.chain(
            [0.0], backoff_delays(self.backoff_s, self.max_backoff_s, self.retries)
        )

    def _failed(self, e: BaseException, delay: float) -> None:
        """One attempt failed: a spec refusal is final, anything else is logged (rate-limited)."""
        if (refused := _refused(e)) is not None:
            raise refused from None
        limited.warning(
            "retry",
            "policy server %s: %s; retrying (back-off up to %.1f s)%s",
            self.url,
            _short(e),
            self.max_backoff_s,
            "" if self.retries is None else f", {self.retries} retries",
        )

    def _check_stopped(self) -> None:
        if self._stopped.is_set():
            raise ClientStopped(
                f"policy client for {self.url} stopped while waiting for the server"
            )

    def _unavailable(self, last: BaseException | None) -> PolicyServerUnavailable:
        return PolicyServerUnavailable(
            f"policy server {self.url} unreachable after {self.retries} retries: {last}"
        )


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 300 else text[:297] + "..."


class PolicyClient(_ClientSettings):
    """Blocking client: ``PolicyClient("ws://host:8000").infer(obs) -> {"actions": ...}``."""

    def __init__(self, url: str, **settings: Any) -> None:
        super().__init__(url, **settings)
        self._call(lambda: None)  # connect now so errors surface at construction

    def _connect(self) -> websockets.sync.client.ClientConnection:
        ws = open_sync(
            self.url,
            open_timeout=self.connect_timeout_s,
            additional_headers=_headers(self.api_key, self.robot_spec),
            max_size=None,
            compression=None,
        )
        self.metadata = parse_metadata(ws.recv(timeout=self.connect_timeout_s))
        return ws

    def _call(self, fn: Any) -> Any:
        last: BaseException | None = None
        for delay in self._delays():
            if delay and self._stopped.wait(delay):
                break
            self._check_stopped()
            try:
                if self._ws is None:
                    self._ws = self._connect()
                    if last is not None:
                        self.reconnects += 1
                        log.info("reconnected to policy server %s", self.url)
                return fn()
            except _RETRYABLE as e:
                last = e
                self._drop()
                self._failed(e, delay)
        self._check_stopped()
        raise self._unavailable(last)

    def _drop(self) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        """One observation (canonical or openpi layout) -> the response map."""
        frame = self._packer.pack(obs)

        def roundtrip() -> dict[str, Any]:
            assert self._ws is not None
            self._ws.send(frame)
            return decode_response(self._ws.recv(timeout=self.timeout_s))

        return self._call(roundtrip)

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncPolicyClient(_ClientSettings):
    """asyncio client: ``client = await AsyncPolicyClient.connect(url)``; ``await
    client.infer(obs)``."""

    @classmethod
    async def connect(cls, url: str, **kwargs: Any) -> AsyncPolicyClient:
        client = cls(url, **kwargs)
        await client._call(None)
        return client

    async def _open(self) -> websockets.asyncio.client.ClientConnection:
        ws = await websockets.asyncio.client.connect(
            self.url,
            open_timeout=self.connect_timeout_s,
            additional_headers=_headers(self.api_key, self.robot_spec),
            max_size=None,
            compression=None,
        )
        self.metadata = parse_metadata(await asyncio.wait_for(ws.recv(), self.connect_timeout_s))
        return ws

    async def _sleep(self, delay: float) -> None:
        """Sleep ``delay`` s, waking early (in 0.1 s steps) when :meth:`stop` is called."""
        end = time.monotonic() + delay
        while not self._stopped.is_set() and (left := end - time.monotonic()) > 0:
            await asyncio.sleep(min(left, 0.1))

    async def _call(self, frame: bytes | None) -> Any:
        last: BaseException | None = None
        for delay in self._delays():
            await self._sleep(delay)
            self._check_stopped()
            try:
                if self._ws is None:
                    self._ws = await self._open()
                    if last is not None:
                        self.reconnects += 1
                        log.info("reconnected to policy server %s", self.url)
                if frame is None:
                    return None
                await self._ws.send(frame)
                return decode_response(await asyncio.wait_for(self._ws.recv(), self.timeout_s))
            except _RETRYABLE as e:
                last = e
                await self._drop()
                self._failed(e, delay)
        raise self._unavailable(last)

    async def _drop(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            self._ws = None

    async def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self._packer.pack(obs))

    async def close(self) -> None:
        await self._drop()

    async def __aenter__(self) -> AsyncPolicyClient:
        await self._call(None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
