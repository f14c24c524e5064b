"""Who gets in: plain-HTTP answers and the checks on every WebSocket upgrade, before any frame.

Order on ``/``: API key (401), robot spec (409), then capacity. Authentication comes first so
an unauthenticated client can neither use nor hold a slot; at the cap a new client takes the
slot of the oldest connection that has not sent a request yet (see
:mod:`policy_server.connections` for why), else of the connection idle longest (if idle at
least ``evict_idle_s``), else it gets 503 with ``Retry-After``. ``/metrics`` needs the API key when
one is set; ``/healthz`` never does (load balancers and compose health checks poll it). ``/weights``
needs the bearer token.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from policy_server.config import ServerConfig
from policy_server.connections import ConnectionTable
from policy_server.metrics import ServerMetrics
from policy_server.ratelimit import RateLimitedLog
from policy_server.spec_check import SPEC_HEADER, refusal
from rlinf_contracts.spec import RobotSpec
from rlinf_contracts.wire import clip

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)

INFER_PATH, WEIGHTS_PATH, HEALTH_PATH, METRICS_PATH = "/", "/weights", "/healthz", "/metrics"
CLOSE_GOING_AWAY = 1001


def bearer(headers: Headers, scheme: str) -> str | None:
    """The credential of ``Authorization: <scheme> <credential>``, or None."""
    value = headers.get("Authorization", "")
    prefix = f"{scheme} "
    return value[len(prefix) :].strip() if value.startswith(prefix) else None


def key_matches(headers: Headers, key: str) -> bool:
    """``Api-Key <key>`` (openpi's header) or ``Bearer <key>`` (what Prometheus scrapers send)."""
    sent = bearer(headers, "Api-Key") or bearer(headers, "Bearer")
    return sent is not None and hmac.compare_digest(sent.encode(), key.encode())


class Gate:
    """``process_request`` of the server: answers HTTP paths, admits or refuses upgrades."""

    def __init__(
        self,
        config: ServerConfig,
        spec: RobotSpec,
        metrics: ServerMetrics,
        table: ConnectionTable,
        weight_version: Callable[[], int],
        evict: Callable[[Any, str], None],
    ) -> None:
        self.config, self.spec, self.metrics, self.table = config, spec, metrics, table
        self.weight_version, self.evict = weight_version, evict

    def __call__(self, conn: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        if path == HEALTH_PATH:
            return conn.respond(HTTPStatus.OK, "OK\n")
        if path == METRICS_PATH:
            return self._metrics(conn, request)
        if path == WEIGHTS_PATH:
            return self._admit_push(conn, request)
        if path != INFER_PATH:
            return conn.respond(
                HTTPStatus.NOT_FOUND,
                f"unknown path {clip(path)}; use / , /weights, /healthz or /metrics\n",
            )
        return self._admit_client(conn, request)

    def _refuse(
        self, conn: ServerConnection, status: HTTPStatus, kind: str, reason: str
    ) -> Response:
        self.metrics.count_error(kind)
        limited.warning(kind, "refused client %s: %s", conn.remote_address, reason)
        return conn.respond(status, reason + "\n")

    def _metrics(self, conn: ServerConnection, request: Request) -> Response:
        if self.config.api_key is not None and not key_matches(
            request.headers, self.config.api_key
        ):
            return self._refuse(
                conn,
                HTTPStatus.UNAUTHORIZED,
                "unauthorized",
                "/metrics needs 'Authorization: Api-Key <key>' (or Bearer) when the server "
                "has a key",
            )
        resp = conn.respond(
            HTTPStatus.OK, self.metrics.render(self.weight_version(), len(self.table))
        )
        del resp.headers["Content-Type"]  # Headers is a multi-dict: replace, not append
        resp.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
        return resp

    def _admit_client(self, conn: ServerConnection, request: Request) -> Response | None:
        if self.config.api_key is not None and not key_matches(
            request.headers, self.config.api_key
        ):
            return self._refuse(
                conn,
                HTTPStatus.UNAUTHORIZED,
                "unauthorized",
                "missing or wrong 'Authorization: Api-Key <key>'",
            )
        reason = refusal(self.spec, request.headers.get(SPEC_HEADER))
        if reason is not None:
            return self._refuse(conn, HTTPStatus.CONFLICT, "spec_mismatch", reason)
        if len(self.table) < self.config.max_connections or self.make_room():
            return None
        resp = self._refuse(
            conn,
            HTTPStatus.SERVICE_UNAVAILABLE,
            "connection_limit",
            f"connection limit {self.config.max_connections} reached and no connection idle "
            f"{self.config.evict_idle_s:g} s; retry later",
        )
        resp.headers["Retry-After"] = "1"
        return resp

    def make_room(self) -> bool:
        """Evict the oldest connection without a request yet, else the connection idle longest if
        it has been idle ``evict_idle_s``; True if one went."""
        pending = self.table.oldest_pending()
        if pending is not None:
            self.table.remove(pending)
            self.metrics.count_error("evicted_pending")
            limited.info(
                "evicted",
                "server full: closing connection %s, which has sent no request, for a new client",
                getattr(pending, "remote_address", pending),
            )
            self.evict(pending, "evicted: no request sent while the server was full")
            return True
        found = self.table.longest_idle()
        if found is None or found[1] < self.config.evict_idle_s:
            return False
        victim, idle = found
        self.table.remove(victim)
        self.metrics.count_error("evicted_idle")
        limited.info(
            "evicted",
            "server full: closing connection %s idle %.0f s for a new client",
            getattr(victim, "remote_address", victim),
            idle,
        )
        self.evict(victim, "evicted: idle while the server was full")
        return True

    def _admit_push(self, conn: ServerConnection, request: Request) -> Response | None:
        token = bearer(request.headers, "Bearer")
        if self.config.weights_token is None:
            reason, status = (
                "weight push disabled: the server has no weights_token configured",
                HTTPStatus.FORBIDDEN,
            )
        elif token is None:
            reason, status = (
                "weight push needs 'Authorization: Bearer <token>'",
                HTTPStatus.UNAUTHORIZED,
            )
        elif not hmac.compare_digest(token.encode(), self.config.weights_token.encode()):
            reason, status = "weight push token is wrong", HTTPStatus.FORBIDDEN
        else:
            conn.protocol.max_message_size = self.config.max_weights_bytes
            return None
        self.metrics.refused_pushes += 1
        limited.warning(
            "push_refused", "refused weight push from %s: %s", conn.remote_address, reason
        )
        return conn.respond(status, reason + "\n")
