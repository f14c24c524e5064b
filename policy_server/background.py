"""Run a :class:`PolicyServer` on its own event loop in a background thread.

Why: tests, the benchmark and local demos need a live server next to synchronous code (an
openpi client, a sim loop) in one process. ``rlinf serve`` does not use this; it runs the
server on the main thread's loop.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType

from policy_server.server import PolicyServer


class ServerThread:
    """``with ServerThread(server) as srv: srv.url`` — started on enter, stopped on exit."""

    def __init__(self, server: PolicyServer, start_timeout: float = 30.0) -> None:
        self.server = server
        self.start_timeout = start_timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="policy-server", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.server.start())
        except BaseException as e:
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(self.start_timeout):
            raise TimeoutError(f"policy server did not start within {self.start_timeout} s")
        if self._error is not None:
            raise RuntimeError(f"policy server failed to start: {self._error}") from self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop)
        try:
            fut.result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self._loop.close()

    def call(self, coro_fn, timeout: float = 10.0):
        """Run ``coro_fn()`` on the server's loop (e.g. to read state consistently) and wait."""
        return asyncio.run_coroutine_threadsafe(coro_fn(), self._loop).result(timeout)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
