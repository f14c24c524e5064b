"""Clients that connect and then stall (a trickled handshake or frame) cannot lock a working
client out: a connection holds its slot only once it has sent a request."""

from __future__ import annotations

import base64
import os
import socket
import threading
import time

import numpy as np
import pytest
import websockets
import websockets.sync.client
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from ps_helpers import running_server

from policy_server.client import PolicyClient

GOOD = {"state": np.array([0.1, 0.2, 0.3, 0.4], np.float32)}
CAP = 64  # ServerConfig's default max_connections


def _upgrade(port: int) -> socket.socket:
    """A socket that completed the WebSocket handshake and then starts a frame it never finishes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: "
            f"Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "server closed during the handshake"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head[:80]
    sock.sendall(
        bytes([0x82, 0x80 | 126]) + (60_000).to_bytes(2, "big") + os.urandom(4)
    )  # masked, 60 kB
    return sock


def _half_handshake(port: int) -> socket.socket:
    """A socket that sends the first bytes of a handshake and never the rest."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return sock


class Trickler:
    """Keeps every stalled socket alive by sending one more byte each now and then."""

    def __init__(self, socks: list[socket.socket]) -> None:
        self.socks, self.stop = socks, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            for s in self.socks:
                try:
                    s.send(b"x")
                except OSError:
                    pass  # closed by the server (evicted or timed out): fine

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        for s in self.socks:
            s.close()


def _wait_for(cond, what: str, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning")
def test_stalled_connections_at_the_cap_do_not_lock_out_a_working_client():
    # evict_idle_s far beyond the test: the working client must get in without idle eviction
    with running_server(evict_idle_s=3600.0) as srv:
        socks = [_half_handshake(srv.port) for _ in range(8)]
        socks += [_upgrade(srv.port) for _ in range(CAP)]
        trickler = Trickler(socks)
        try:
            _wait_for(
                lambda: len(srv.server.connections) == CAP, f"{CAP} stalled connections to be open"
            )
            refused, deadline = 0, time.monotonic() + 30
            while True:  # a client that is refused retries; it must be served before the deadline
                try:
                    with PolicyClient(srv.url, retries=0, connect_timeout_s=30) as client:
                        assert client.infer(GOOD)["actions"].shape == (3, 2)
                    break
                except Exception:
                    refused += 1
                    assert time.monotonic() < deadline, (
                        f"a working client was refused {refused} times"
                    )
                    time.sleep(0.2)
            openpi = WebsocketClientPolicy(host="127.0.0.1", port=srv.port)  # openpi's client too
            assert openpi.infer(GOOD)["actions"].shape == (3, 2)
            openpi._ws.close()
            assert srv.server.metrics.errors["evicted_pending"] >= 1  # a stalled one gave way
        finally:
            trickler.close()


def test_a_client_that_has_sent_a_request_keeps_its_slot_at_the_cap():
    with running_server(max_connections=2, evict_idle_s=3600.0) as srv:
        a, b = PolicyClient(srv.url, retries=0), PolicyClient(srv.url, retries=0)
        a.infer(GOOD)
        b.infer(GOOD)
        with pytest.raises(websockets.InvalidStatus) as info:
            websockets.sync.client.connect(srv.url, open_timeout=30)
        assert info.value.response.status_code == 503
        assert a.infer(GOOD)["weight_version"] == 0 and a.reconnects == 0
        assert b.infer(GOOD)["weight_version"] == 0 and b.reconnects == 0
        a.close()
        b.close()
