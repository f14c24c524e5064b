"""The live view over HTTP: ``/`` (the page), ``/snapshot.json``, ``/frames/<robot>/<cam>.png``.

Why websockets' HTTP handling and not a web framework: the learner's other endpoints (the ingest,
``rlinf_data.ingest``; the policy server) already run on ``websockets`` (a dependency of every
install) and answer plain HTTP requests such as ``/healthz`` from its ``process_request`` hook,
which returns a full :class:`websockets.http11.Response`. Three GET routes need nothing more --
no request bodies, no sessions, no streaming -- so the view adds no dependency and no
hand-written HTTP parsing; it runs on its own port and event-loop thread, so a slow browser never
touches the ingest's loop.

Token: every route but ``/healthz`` needs the view's token (``learner.live.config``), sent as
``Authorization: Bearer <token>`` (scripts) or ``?token=<token>`` (a browser cannot set a header
on a page it opens; the page passes it on to its frame and JSON links). Compared in constant
time, as the ingest does. Loopback by default (``live.host``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from learner.live.page import render_page
from learner.live.snapshot import Snapshot

log = logging.getLogger(__name__)
FramePng = Callable[[str, str], "bytes | None"]


def _response(status: HTTPStatus, body: bytes, content_type: str) -> Any:
    from websockets.datastructures import Headers
    from websockets.http11 import Response

    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("Connection", "close"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)


def _text(status: HTTPStatus, text: str) -> Any:
    return _response(status, text.encode(), "text/plain; charset=utf-8")


class LiveServer:
    """``start()`` / ``stop()``; ``snapshot()`` and ``frame_png(robot, camera)`` are called on the
    server's thread for every request, so they must be thread-safe and quick."""

    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        frame_png: FramePng,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        refresh_s: float = 5.0,
    ) -> None:
        if not token:
            raise ValueError("the live view needs a token (learner.live.config.resolve_token)")
        self.snapshot, self.frame_png, self.token = snapshot, frame_png, token
        self.host, self.port, self.refresh_s = host, port, refresh_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="live-view", daemon=True
        )
        self._server: Any = None

    # ---- HTTP ---------------------------------------------------------------------------------
    def _authorized(self, request: Any, query: dict[str, list[str]]) -> bool:
        value = request.headers.get("Authorization", "")
        sent = value[len("Bearer ") :].strip() if value.startswith("Bearer ") else ""
        sent = sent or (query.get("token") or [""])[0]
        return bool(sent) and hmac.compare_digest(sent.encode(), self.token.encode())

    def _route(self, conn: Any, request: Any) -> Any:
        url = urlsplit(request.path)
        path, query = url.path, parse_qs(url.query)
        if path == "/healthz":
            return _text(HTTPStatus.OK, "ok\n")
        if path == "/favicon.ico":  # browsers ask without the token: no warning for it
            return _text(HTTPStatus.NOT_FOUND, "no icon\n")
        if not self._authorized(request, query):
            log.warning(
                "live view: refused %s from %s: missing or wrong token", path, conn.remote_address
            )
            return _text(
                HTTPStatus.UNAUTHORIZED,
                "the live view needs its token: open /?token=<token> or send "
                "'Authorization: Bearer <token>' (live.token_file, else the ingest's token)\n",
            )
        try:
            return self._serve(path)
        except Exception as e:  # a bug in one page must not take the view down
            log.exception("live view: %s failed", path)
            return _text(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}\n")

    def _serve(self, path: str) -> Any:
        tail = "?" + urlencode({"token": self.token})
        if path in ("/", "/index.html"):
            html = render_page(
                self.snapshot(),
                lambda f: (
                    f"/frames/{quote(f.robot_id, safe='')}/{quote(f.camera, safe='')}.png" + tail
                ),
                "/snapshot.json" + tail,
                self.refresh_s,
            )
            return _response(HTTPStatus.OK, html.encode(), "text/html; charset=utf-8")
        if path == "/snapshot.json":
            body = json.dumps(self.snapshot().to_dict(), indent=1).encode()
            return _response(HTTPStatus.OK, body, "application/json")
        parts = path.split("/")
        if len(parts) == 4 and parts[1] == "frames" and parts[3].endswith(".png"):
            png = self.frame_png(unquote(parts[2]), unquote(parts[3][: -len(".png")]))
            if png is not None:
                return _response(HTTPStatus.OK, png, "image/png")
        return _text(HTTPStatus.NOT_FOUND, "no such page; the live view is at /\n")

    # ---- lifecycle ----------------------------------------------------------------------------
    async def _start(self) -> None:
        from websockets.asyncio.server import serve

        from rlinf_contracts.server_logs import quiet_library_log

        async def no_websocket(ws: Any) -> None:  # every request is answered by _route
            await ws.close()

        self._server = await serve(
            no_websocket,
            self.host,
            self.port,
            process_request=self._route,
            logger=quiet_library_log(),
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def start(self, timeout_s: float = 10.0) -> LiveServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout_s)
        return self

    @property
    def url(self) -> str:
        """The page's address without the token (logged; the token is not)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def stop(self, timeout_s: float = 10.0) -> None:
        async def shutdown() -> None:
            self._server.close()
            await self._server.wait_closed()

        if self._server is not None:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout_s)
            self._server = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
