"""The policy server: openpi-compatible WebSocket inference, weight hot-swap, health and metrics.

Paths (DESIGN.md, "The wire"):

- ``ws://host:port/`` — metadata frame on connect, then strictly one response per request: a
  map with ``actions`` [chunk, A], ``weight_version`` and timings. A bad request (not msgpack,
  wrong types, missing key, wrong dtype/shape) is answered with a text frame naming the problem
  and the connection stays usable; an error inside the policy is answered with a text frame and
  the connection closed with 1011 (openpi's convention). Oversized frames close with 1009.
- ``ws://host:port/weights`` — authenticated (``Authorization: Bearer <token>``) weight push,
  see :mod:`policy_server.messages`; refused and logged without a valid token.
- ``GET /healthz`` (200) and ``GET /metrics`` (Prometheus text) without upgrading.

Batching lives in :mod:`policy_server.batching`, weight buffers in :mod:`policy_server.hotswap`,
request layouts in :mod:`policy_server.observations`; this module only routes frames.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from policy_server.batching import DynamicBatcher, InferenceError
from policy_server.config import ServerConfig
from policy_server.hotswap import ModelSlot, WeightLoadError
from policy_server.messages import MessageError, ServerMetadata, WeightAck, WeightPush
from policy_server.metrics import ServerMetrics
from policy_server.observations import ADAPTERS, ObservationError, to_canonical, validate_observation
from policy_server.policy import ServedPolicy, check_policy
from policy_server.spec_check import SPEC_HEADER, refusal
from rlinf_contracts.wire import Packer, WireError, packb, unpackb

log = logging.getLogger(__name__)

INFER_PATH, WEIGHTS_PATH = "/", "/weights"
CLOSE_INFERENCE_ERROR, CLOSE_TRY_AGAIN = 1011, 1013


def _bearer(headers: Headers, scheme: str) -> str | None:
    value = headers.get("Authorization", "")
    prefix = f"{scheme} "
    return value[len(prefix):].strip() if value.startswith(prefix) else None


class PolicyServer:
    """Serve one :class:`~policy_server.policy.ServedPolicy` over the wire. Run with :meth:`start`."""

    def __init__(
        self, policy: ServedPolicy, config: ServerConfig, *, weight_version: int = 0, policy_name: str | None = None
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
        self._infer_connections = 0
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
        self._load_executor = ThreadPoolExecutor(1, thread_name_prefix="policy-weights", initializer=init)
        self._push_lock = asyncio.Lock()
        self._batcher = DynamicBatcher(
            self.slot, self.metrics, self.config.max_batch, self.config.max_wait_ms,
            open_clients=lambda: self._infer_connections, thread_init=init, inline_forward_ms=self.config.inline_forward_ms,
        )
        self._batcher.start()
        self._server = await serve(
            self._handler, self.config.host, self.config.port, process_request=self._process_request,
            max_size=self.config.max_frame_bytes, compression=None, ping_interval=20, ping_timeout=60,
        )
        log.info("policy server '%s' listening on %s (weights v%d, max_batch %d, max_wait %.1f ms)",
                 self.policy_name, self.url, self.slot.version, self.config.max_batch, self.config.max_wait_ms)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self._batcher is not None:
            await self._batcher.stop()
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
    def url(self) -> str:
        host = "127.0.0.1" if self.config.host in ("0.0.0.0", "") else self.config.host
        return f"ws://{host}:{self.port}"

    def metadata(self) -> ServerMetadata:
        return ServerMetadata(
            policy_name=self.policy_name, observation_spec=self.obs_spec, action_dim=self.spec.action_dim,
            chunk=self.spec.action.chunk, weight_version=self.slot.version, uses_instruction=self.spec.uses_instruction,
            max_frame_bytes=self.config.max_frame_bytes, accepts=tuple(ADAPTERS.names()),
            robot_spec=self.spec.to_dict(),
        )

    # -- plain HTTP and admission --------------------------------------------------------------
    def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        if path == "/healthz":
            return conn.respond(HTTPStatus.OK, "OK\n")
        if path == "/metrics":
            resp = conn.respond(HTTPStatus.OK, self.metrics.render(self.slot.version, self._infer_connections))
            del resp.headers["Content-Type"]  # Headers is a multi-dict: replace, not append
            resp.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
            return resp
        if path == WEIGHTS_PATH:
            return self._admit_push(conn, request)
        if path != INFER_PATH:
            return conn.respond(HTTPStatus.NOT_FOUND, f"unknown path {path!r}; use / , /weights, /healthz or /metrics\n")
        if self._infer_connections >= self.config.max_connections:
            self.metrics.count_error("connection_limit")
            log.warning("refused client %s: connection limit %d reached", conn.remote_address, self.config.max_connections)
            return conn.respond(HTTPStatus.SERVICE_UNAVAILABLE, "connection limit reached; retry later\n")
        if self.config.api_key is not None:
            key = _bearer(request.headers, "Api-Key")
            if key is None or not hmac.compare_digest(key, self.config.api_key):
                self.metrics.count_error("unauthorized")
                log.warning("refused client %s: missing or wrong API key", conn.remote_address)
                return conn.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong 'Authorization: Api-Key <key>'\n")
        reason = refusal(self.spec, request.headers.get(SPEC_HEADER))
        if reason is not None:
            self.metrics.count_error("spec_mismatch")
            log.warning("refused client %s: %s", conn.remote_address, reason)
            return conn.respond(HTTPStatus.CONFLICT, reason + "\n")
        return None

    def _admit_push(self, conn: ServerConnection, request: Request) -> Response | None:
        token = _bearer(request.headers, "Bearer")
        if self.config.weights_token is None:
            reason, status = "weight push disabled: the server has no weights_token configured", HTTPStatus.FORBIDDEN
        elif token is None:
            reason, status = "weight push needs 'Authorization: Bearer <token>'", HTTPStatus.UNAUTHORIZED
        elif not hmac.compare_digest(token, self.config.weights_token):
            reason, status = "weight push token is wrong", HTTPStatus.FORBIDDEN
        else:
            conn.protocol.max_message_size = self.config.max_weights_bytes  # type: ignore[attr-defined]
            return None
        self.metrics.refused_pushes += 1
        log.warning("refused weight push from %s: %s", conn.remote_address, reason)
        return conn.respond(status, reason + "\n")

    # -- websocket handlers --------------------------------------------------------------------
    async def _handler(self, ws: ServerConnection) -> None:
        if urlsplit(ws.request.path).path == WEIGHTS_PATH:  # type: ignore[union-attr]
            await self._weights_handler(ws)
            return
        self._infer_connections += 1
        try:
            if self._infer_connections > self.config.max_connections:  # raced past admission
                self.metrics.count_error("connection_limit")
                await ws.close(CLOSE_TRY_AGAIN, "connection limit reached; retry later")
                return
            log.info("client %s connected (%d open)", ws.remote_address, self._infer_connections)
            await ws.send(packb(self.metadata().to_wire()))
            await self._serve_requests(ws)
        except websockets.ConnectionClosed:
            pass
        finally:
            self._infer_connections -= 1
            log.info("client %s disconnected (%d open)", ws.remote_address, self._infer_connections)

    def _parse(self, message: Any) -> dict[str, Any]:
        if isinstance(message, str):
            raise WireError("requests must be binary msgpack frames, got a text frame")
        obs = to_canonical(unpackb(message), self.config.adapter, self.config.camera_map)
        return validate_observation(obs, self.obs_spec, self.spec.uses_instruction)

    async def _serve_requests(self, ws: ServerConnection) -> None:
        assert self._batcher is not None
        packer, prev_total_ms = Packer(), 0.0
        async for message in ws:
            t_recv = time.perf_counter()
            try:
                sample = self._parse(message)
            except (WireError, ObservationError) as e:
                self.metrics.count_error("bad_request")
                log.info("bad request from %s: %s", ws.remote_address, e)
                await ws.send(f"bad request: {e}")
                continue
            try:
                result = await self._batcher.submit(sample, t_recv)
            except InferenceError as e:
                self.metrics.count_error("inference")
                await ws.send(f"inference error:\n{e}")
                await ws.close(CLOSE_INFERENCE_ERROR, "inference error")
                return
            total_ms = (time.perf_counter() - t_recv) * 1000.0
            self.metrics.observe_request(total_ms)  # before sending: a client that got it sees it counted
            await ws.send(packer.pack({
                "actions": result.actions,
                "weight_version": result.weight_version,
                "policy_timing": {"infer_ms": result.infer_ms},
                "server_timing": {"infer_ms": result.infer_ms, "queue_ms": result.queue_ms, "total_ms": total_ms,
                                  "batch_size": result.batch_size, "prev_total_ms": prev_total_ms},
            }))
            prev_total_ms = (time.perf_counter() - t_recv) * 1000.0

    async def _weights_handler(self, ws: ServerConnection) -> None:
        log.info("weight pusher %s connected", ws.remote_address)
        try:
            await ws.send(packb(self.metadata().to_wire()))
            async for message in ws:
                try:
                    if isinstance(message, str):
                        raise WireError("weight pushes must be binary msgpack frames, got a text frame")
                    ack = await self._apply_push(WeightPush.from_wire(unpackb(message)))
                except (WireError, MessageError, WeightLoadError, ValueError) as e:
                    self.metrics.refused_pushes += 1
                    log.warning("refused weight push from %s: %s", ws.remote_address, e)
                    await ws.send(f"weight push refused: {e}")
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
                raise ValueError(f"stale weight version {version}: server already serves {current}; push a newer version")
            t0 = time.perf_counter()
            loop = asyncio.get_running_loop()
            num = await loop.run_in_executor(self._load_executor, self.slot.load_spare, push.data, version)
            load_ms = (time.perf_counter() - t0) * 1000.0
            wait_ms = await self._batcher.swap(version)
        log.info("weight version %d serving (%d tensors, %.1f MB, load %.1f ms, swap wait %.1f ms)",
                 version, num, len(push.data) / 1e6, load_ms, wait_ms)
        return WeightAck(version=version, num_tensors=num, load_ms=load_ms, wait_ms=wait_ms)
