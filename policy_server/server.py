"""The policy server: openpi-compatible WebSocket inference, weight hot-swap, health and metrics.

Paths (DESIGN.md, "The wire"):

- ``ws://host:port/`` — metadata frame on connect, then strictly one response per request: a
  map with ``actions`` [chunk, A], ``weight_version`` and timings. A bad request (not msgpack,
  wrong types, missing key, wrong dtype/shape) is answered with a text frame naming the problem
  and the connection stays usable; an error inside the policy is answered with a text frame and
  the connection closed with 1011 (openpi's convention). Oversized frames close with 1009.
  Error texts are capped at ``MAX_ERROR_CHARS`` and never echo unbounded input; their log lines
  are rate-limited. A connection silent for ``idle_timeout_s`` closes with 1001; a client that
  stops reading replies for ``send_timeout_s`` is dropped.
- ``ws://host:port/weights`` — authenticated (``Authorization: Bearer <token>``) weight push,
  see :mod:`policy_server.messages`; refused and logged without a valid token.
- ``GET /healthz`` (200) and ``GET /metrics`` (Prometheus text; needs the API key when one is
  set) without upgrading. The websockets library's per-connection lines ("connection open",
  "connection closed", one pair per health poll) are logged at DEBUG: at INFO the log says what
  changed (start, stop, clients, refusals, weight versions), not the same line per poll.

Admission (auth, spec, connection cap) lives in :mod:`policy_server.admission`, batching in
:mod:`policy_server.batching`, weight buffers in :mod:`policy_server.hotswap`, request layouts in
:mod:`policy_server.observations`; this module only routes frames.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.server import Server, ServerConnection, serve

from policy_server.admission import CLOSE_GOING_AWAY, WEIGHTS_PATH, Gate
from policy_server.batching import BatcherClosed, DynamicBatcher, InferenceError
from policy_server.config import ServerConfig
from policy_server.connections import ConnectionTable
from policy_server.hotswap import ModelSlot, WeightLoadError, decode_push
from policy_server.messages import MessageError, ServerMetadata, WeightAck, WeightPush
from policy_server.metrics import ServerMetrics
from policy_server.observations import (
    ADAPTERS,
    ObservationError,
    to_canonical,
    validate_observation,
)
from policy_server.policy import ServedPolicy, check_policy
from policy_server.ratelimit import RateLimitedLog
from rlinf_contracts.server_logs import quiet_library_log
from rlinf_contracts.wire import Packer, WireError, clip, packb, unpackb

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)

CLOSE_INFERENCE_ERROR, CLOSE_TRY_AGAIN = 1011, 1013
MAX_ERROR_CHARS = 1024  # longest text frame the server ever answers with


class SlowReader(Exception):
    """A reply could not be written within ``send_timeout_s``: the client is not reading."""


def error_text(prefix: str, error: BaseException | str, keep: str = "head") -> str:
    """``prefix: message``, capped at :data:`MAX_ERROR_CHARS` (messages quote clipped input only;
    this is the last guard). ``keep="tail"`` cuts the start instead (a traceback ends with the
    exception line). An exception without a message is named by its type, never left empty.

    >>> error_text("bad request", ValueError())
    'bad request: ValueError (no detail)'
    >>> len(error_text("inference error", "x" * 5000 + " the end", keep="tail"))
    1024
    """
    detail = str(error).strip() or f"{type(error).__name__} (no detail)"
    text = f"{prefix}: {detail}"
    if len(text) <= MAX_ERROR_CHARS:
        return text
    if keep == "tail":
        head = f"{prefix}: (cut)… "
        return head + detail[len(head) - MAX_ERROR_CHARS :]
    return text[: MAX_ERROR_CHARS - 12] + " …(cut)"


class PolicyServer:
    """Serve one :class:`~policy_server.policy.ServedPolicy` over the wire. Run with
    :meth:`start`."""

    def __init__(
        self,
        policy: ServedPolicy,
        config: ServerConfig,
        *,
        weight_version: int = 0,
        policy_name: str | None = None,
    ) -> None:
        config.validate()
        if config.adapter != "auto":
            ADAPTERS.get(config.adapter)  # unknown adapter names fail here, with suggestions
        check_policy(policy)
        self.config = config
        self.policy_name = policy_name or getattr(policy, "name", type(policy).__name__)
        self.spec = policy.robot_spec
        self.obs_spec = self.spec.observation_spec()
        self.slot = ModelSlot(policy, weight_version)
        self.metrics = ServerMetrics(window=config.latency_window)
        self.connections = ConnectionTable()
        self.gate = Gate(
            config,
            self.spec,
            self.metrics,
            self.connections,
            lambda: self.slot.version,
            self._evict,
        )
        self._library_log = quiet_library_log()  # each /healthz poll: no INFO line
        self._server: Server | None = None
        self._batcher: DynamicBatcher | None = None
        self._push_lock: asyncio.Lock | None = None
        self._load_executor: ThreadPoolExecutor | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Bind and start serving (returns once listening; ``port`` is then the bound port)."""
        init = getattr(self.slot.active, "thread_init", None)  # per worker thread, see batching
        if init is not None:
            init()
        self._load_executor = ThreadPoolExecutor(
            1, thread_name_prefix="policy-weights", initializer=init
        )
        self._push_lock = asyncio.Lock()
        self._batcher = DynamicBatcher(
            self.slot,
            self.metrics,
            self.config.max_batch,
            self.config.max_wait_ms,
            open_clients=lambda: self.connections.active,
            thread_init=init,
            inline_forward_ms=self.config.inline_forward_ms,
        )
        self._batcher.start()
        cfg = self.config
        self._server = await serve(
            self._handler,
            cfg.host,
            cfg.port,
            process_request=self.gate,
            max_size=cfg.max_frame_bytes,
            max_queue=cfg.max_queued_frames,
            write_limit=cfg.write_limit_bytes,
            compression=None,
            ping_interval=20,
            ping_timeout=60,
            close_timeout=5,
            logger=self._library_log,
        )
        log.info(
            "policy server '%s' listening on %s (weights v%d, max_batch %d, max_wait %.1f ms, "
            "%d connections, API key %s)",
            self.policy_name,
            " ".join(self.bound_urls),
            self.slot.version,
            cfg.max_batch,
            cfg.max_wait_ms,
            cfg.max_connections,
            "required" if cfg.api_key else "not set",
        )
        if cfg.exposed and cfg.api_key is None:
            log.warning(
                "policy server bound to %s with no API key: anyone who can reach port %d can "
                "run the policy; set RLINF_API_KEY or RLINF_API_KEY_FILE, or bind 127.0.0.1",
                cfg.host,
                self.port,
            )

    async def stop(self) -> None:
        """Close every connection (1001), then fail requests still waiting for a forward (their
        handlers must not keep shutdown waiting for a slow forward), then wait for the handlers."""
        if self._server is not None:
            self._server.close(reason="policy server shutting down")
        if self._batcher is not None:
            await self._batcher.stop()
        if self._server is not None:
            await self._server.wait_closed()
        if self._load_executor is not None:
            self._load_executor.shutdown(wait=False, cancel_futures=True)
        log.info("policy server stopped")

    async def serve_forever(self) -> None:
        await self.start()
        try:
            await asyncio.Future()  # until cancelled (Ctrl-C)
        finally:
            await self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started; call start() first")
        return int(next(iter(self._server.sockets)).getsockname()[1])

    @property
    def bound_urls(self) -> list[str]:
        """``ws://addr:port`` of every socket actually bound (0.0.0.0 = all interfaces)."""
        if self._server is None:
            raise RuntimeError("server not started; call start() first")
        out = []
        for sock in self._server.sockets:
            host, port = sock.getsockname()[:2]
            out.append(f"ws://[{host}]:{port}" if ":" in host else f"ws://{host}:{port}")
        return out

    @property
    def url(self) -> str:
        """A URL a client on this machine can connect to (the wildcard address mapped to
        loopback)."""
        host = "127.0.0.1" if self.config.host in ("0.0.0.0", "") else self.config.host
        return f"ws://{host}:{self.port}"

    def metadata(self) -> ServerMetadata:
        return ServerMetadata(
            policy_name=self.policy_name,
            observation_spec=self.obs_spec,
            action_dim=self.spec.action_dim,
            chunk=self.spec.action.chunk,
            weight_version=self.slot.version,
            uses_instruction=self.spec.uses_instruction,
            max_frame_bytes=self.config.max_frame_bytes,
            accepts=tuple(ADAPTERS.names()),
            robot_spec=self.spec.to_dict(),
        )

    # -- connections ---------------------------------------------------------------------------
    def _evict(self, ws: Any, reason: str) -> None:
        asyncio.get_running_loop().create_task(ws.close(CLOSE_GOING_AWAY, reason))

    async def _send(self, ws: ServerConnection, frame: str | bytes) -> None:
        """Send one reply; a client that has not read for ``send_timeout_s`` is cut off."""
        try:
            await asyncio.wait_for(ws.send(frame), self.config.send_timeout_s)
        except TimeoutError:
            raise SlowReader from None

    async def _recv(self, ws: ServerConnection) -> str | bytes | None:
        """The next frame, or None after ``idle_timeout_s`` without one (``recv`` is
        cancel-safe)."""
        timeout = self.config.idle_timeout_s or None
        try:
            return await asyncio.wait_for(ws.recv(), timeout)
        except TimeoutError:
            return None

    # -- websocket handlers --------------------------------------------------------------------
    async def _handler(self, ws: ServerConnection) -> None:
        if urlsplit(ws.request.path).path == WEIGHTS_PATH:  # type: ignore[union-attr]  # set once the handshake ran
            await self._weights_handler(ws)
            return
        # raced past admission
        if len(self.connections) >= self.config.max_connections and not self.gate.make_room():
            self.metrics.count_error("connection_limit")
            await ws.close(CLOSE_TRY_AGAIN, "connection limit reached; retry later")
            return
        self.connections.add(ws)
        limited.info(
            "connect", "client %s connected (%d open)", ws.remote_address, len(self.connections)
        )
        try:
            await self._send(ws, packb(self.metadata().to_wire()))
            await self._serve_requests(ws)
        except websockets.ConnectionClosed:
            pass
        except SlowReader:
            self.metrics.count_error("slow_reader")
            limited.warning(
                "slow_reader",
                "dropped client %s: it has not read replies for %.0f s",
                ws.remote_address,
                self.config.send_timeout_s,
            )
            ws.transport.abort()  # the close handshake cannot get through a full buffer
        finally:
            self.connections.remove(ws)
            limited.info(
                "connect",
                "client %s disconnected (%d open)",
                ws.remote_address,
                len(self.connections),
            )

    def _parse(self, message: Any) -> dict[str, Any]:
        if isinstance(message, str):
            raise WireError("requests must be binary msgpack frames, got a text frame")
        obs = to_canonical(unpackb(message), self.config.adapter, self.config.camera_map)
        accepts = tuple(
            getattr(self.slot.active, "infer_extras", ())
        )  # e.g. RTC's prefix, flow policies only
        return validate_observation(
            obs, self.obs_spec, self.spec.uses_instruction, accepts, self.spec.action.dim
        )

    def _validate(self, ws: ServerConnection, message: Any) -> str | dict[str, Any]:
        """The validated sample, or the error text to answer with (never raises)."""
        try:
            return self._parse(message)
        except (WireError, ObservationError) as e:
            self.metrics.count_error("bad_request")
            limited.info(
                "bad_request", "bad request from %s: %s", ws.remote_address, clip(str(e), 300)
            )
            return error_text("bad request", e)
        except Exception as e:
            self.metrics.count_error("bad_request_unexpected")
            limited.log(
                logging.ERROR,
                "unexpected",
                "request from %s failed validation unexpectedly",
                ws.remote_address,
                exc_info=True,
            )
            return error_text(
                "bad request", RuntimeError(f"could not be validated ({type(e).__name__})")
            )

    async def _serve_requests(self, ws: ServerConnection) -> None:
        assert self._batcher is not None
        packer, prev_total_ms = Packer(), 0.0
        while (message := await self._recv(ws)) is not None:
            t_recv = time.perf_counter()
            self.connections.touch(ws)
            sample = self._validate(ws, message)
            if isinstance(sample, str):
                await self._send(ws, sample)
                continue
            try:
                result = await self._batcher.submit(sample, t_recv)
            except InferenceError as e:
                self.metrics.count_error("inference")
                await self._send(ws, error_text("inference error", e, keep="tail"))
                await ws.close(CLOSE_INFERENCE_ERROR, "inference error")
                return
            except BatcherClosed as e:
                await self._send(ws, error_text("not served", e))
                await ws.close(CLOSE_GOING_AWAY, "policy server shutting down")
                return
            total_ms = (time.perf_counter() - t_recv) * 1000.0
            self.metrics.observe_request(
                total_ms
            )  # before sending: a client that got it sees it counted
            await self._send(
                ws,
                packer.pack(
                    {
                        "actions": result.actions,
                        "weight_version": result.weight_version,
                        "policy_timing": {"infer_ms": result.infer_ms},
                        "server_timing": {
                            "infer_ms": result.infer_ms,
                            "queue_ms": result.queue_ms,
                            "total_ms": total_ms,
                            "batch_size": result.batch_size,
                            "prev_total_ms": prev_total_ms,
                        },
                    }
                ),
            )
            self.connections.touch(ws)
            prev_total_ms = (time.perf_counter() - t_recv) * 1000.0
        if ws in self.connections:
            self.metrics.count_error("idle_timeout")
            limited.info(
                "idle",
                "closing client %s: no request for %.0f s",
                ws.remote_address,
                self.config.idle_timeout_s,
            )
            await ws.close(
                CLOSE_GOING_AWAY, f"idle timeout: no request for {self.config.idle_timeout_s:g} s"
            )

    async def _weights_handler(self, ws: ServerConnection) -> None:
        log.info("weight pusher %s connected", ws.remote_address)
        try:
            await ws.send(packb(self.metadata().to_wire()))
            loop = asyncio.get_running_loop()
            while True:
                parts = [
                    part async for part in ws.recv_streaming()
                ]  # fragments: no big copy on the loop
                try:
                    push = await loop.run_in_executor(self._load_executor, decode_push, parts)
                    ack = await self._apply_push(push)
                except (WireError, MessageError, WeightLoadError, ValueError) as e:
                    self.metrics.refused_pushes += 1
                    limited.warning(
                        "push_refused",
                        "refused weight push from %s: %s",
                        ws.remote_address,
                        clip(str(e), 300),
                    )
                    await ws.send(error_text("weight push refused", e))
                    continue
                await ws.send(packb(ack.to_wire()))
        except websockets.ConnectionClosed:
            pass

    async def _apply_push(self, push: WeightPush) -> WeightAck:
        assert self._push_lock is not None and self._batcher is not None
        async with self._push_lock:  # one push at a time: the spare has one writer
            current = self.slot.version
            version = current + 1 if push.version is None else push.version
            if version <= current:
                raise ValueError(
                    f"stale weight version {version}: server already serves {current}; push "
                    "a newer version"
                )
            t0 = time.perf_counter()
            loop = asyncio.get_running_loop()
            num = await loop.run_in_executor(
                self._load_executor, self.slot.load_spare, push.data, version
            )
            load_ms = (time.perf_counter() - t0) * 1000.0
            wait_ms = await self._batcher.swap(version)
        log.info(
            "weight version %d serving (%d tensors, %.1f MB, load %.1f ms, swap wait %.1f ms)",
            version,
            num,
            len(push.data) / 1e6,
            load_ms,
            wait_ms,
        )
        return WeightAck(version=version, num_tensors=num, load_ms=load_ms, wait_ms=wait_ms)
