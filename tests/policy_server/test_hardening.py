"""The policy server is safe to expose: bind, bounded errors, memory, connection cap, idle
timeout, secrets, /metrics auth, and clients that ride out an outage."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import websockets
from ps_helpers import LinearPolicy, expected_actions, local_config, running_server

from learner.serving import TorchPolicy
from policy_server import server as server_module
from policy_server.background import ServerThread
from policy_server.client import ClientStopped, PolicyClient, open_sync
from policy_server.config import ServerConfig
from policy_server.ratelimit import RateLimitedLog
from policy_server.server import MAX_ERROR_CHARS, PolicyServer
from rlinf_contracts import wire
from rlinf_contracts.config import ConfigError

GOOD = {"state": np.array([0.1, 0.2, 0.3, 0.4], np.float32)}


def _raw(url: str, **kw):
    ws = open_sync(url, max_size=None, compression=None, **kw)
    wire.unpackb(ws.recv(timeout=5))  # metadata frame
    return ws


def _ask(ws, frame) -> str:
    ws.send(frame)
    reply = ws.recv(timeout=10)
    assert isinstance(reply, str), reply
    return reply


def test_binds_loopback_by_default_and_logs_the_real_address(caplog):
    assert ServerConfig().host == "127.0.0.1"
    caplog.set_level(logging.INFO, logger="policy_server.server")
    server = PolicyServer(TorchPolicy(LinearPolicy()), ServerConfig(port=0))
    with ServerThread(server) as srv:
        port = srv.port
        assert srv.server.bound_urls == [f"ws://127.0.0.1:{port}"]
    assert f"listening on ws://127.0.0.1:{port}" in caplog.text
    assert "no API key" not in caplog.text


def test_exposing_without_a_key_warns_and_names_the_wildcard_address(caplog):
    caplog.set_level(logging.INFO, logger="policy_server.server")
    server = PolicyServer(TorchPolicy(LinearPolicy()), ServerConfig(host="0.0.0.0", port=0))
    with ServerThread(server) as srv, PolicyClient(srv.url) as client:
        assert client.infer(GOOD)["actions"].shape == (3, 2)
        port = srv.port
    assert f"listening on ws://0.0.0.0:{port}" in caplog.text
    assert any(
        r.levelno == logging.WARNING and "no API key" in r.getMessage() for r in caplog.records
    )


def test_malformed_frames_of_known_kinds_get_bounded_clear_errors(caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="policy_server.server")
    monkeypatch.setattr(
        server_module, "limited", RateLimitedLog(server_module.log)
    )  # a fresh window
    with running_server() as srv:
        ws = _raw(srv.url)
        openpi_plus_bytes = wire.packb(
            {"observation/state": np.zeros(4, np.float32), b"junk": b"1"}
        )
        assert "observation keys must be strings; got bytes key b'junk'" in _ask(
            ws, openpi_plus_bytes
        )
        beyond_f32 = wire.packb({"state": np.array([1e39, 0, 0, 0], np.float64)})
        assert "'state' contains NaN or inf after conversion to float32" in _ask(ws, beyond_f32)
        huge_key = wire.packb({"k" * 7_500_000: 1})
        reply = _ask(ws, huge_key)
        assert len(reply) <= MAX_ERROR_CHARS and "'state' is missing" in reply and "…" in reply
        huge_dtype = wire.packb(
            {
                "state": {
                    b"__ndarray__": True,
                    b"dtype": "x" * 1_000_000,
                    b"shape": [4],
                    b"data": b"",
                }
            }
        )
        assert len(_ask(ws, huge_dtype)) <= MAX_ERROR_CHARS
        for _ in range(50):  # a flood: logged at most a burst per window
            _ask(ws, b"\xc1")
        ws.send(wire.packb(GOOD))  # still usable
        np.testing.assert_allclose(
            wire.unpackb(ws.recv(timeout=10))["actions"], expected_actions(GOOD["state"], 0)
        )
        ws.close()
    bad_lines = [r for r in caplog.records if "bad request from" in r.getMessage()]
    assert 1 <= len(bad_lines) <= 10, len(bad_lines)
    assert max(len(r.getMessage()) for r in caplog.records) < 2000


def _small_rcvbuf_socket(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    return sock


def test_a_client_that_does_not_read_replies_is_dropped_and_others_are_served():
    big = LinearPolicy(action_dim=256, chunk=64)  # 64 KiB replies fill the socket buffers quickly
    with running_server(big, send_timeout_s=1.0, max_queued_frames=1) as srv:
        ws = open_sync(
            srv.url, sock=_small_rcvbuf_socket(srv.port), max_size=None, compression=None
        )
        frame, sent, dropped = wire.packb(GOOD), [0], threading.Event()

        def flood() -> None:
            try:
                for _ in range(2000):
                    ws.send(frame)
                    sent[0] += 1
            except (websockets.ConnectionClosed, OSError):
                dropped.set()

        sender = threading.Thread(target=flood, daemon=True)
        sender.start()
        deadline = time.monotonic() + 30
        while srv.server.metrics.errors["slow_reader"] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert srv.server.metrics.errors["slow_reader"] == 1, f"not dropped after {sent[0]} frames"
        assert len(srv.server.connections) == 0
        sender.join(10)
        assert dropped.is_set() or sent[0] == 2000
        with PolicyClient(srv.url) as good:
            assert good.infer(GOOD)["actions"].shape == (64, 256)


def test_idle_connections_time_out():
    with running_server(idle_timeout_s=0.5) as srv:
        ws = _raw(srv.url)
        with pytest.raises(websockets.ConnectionClosed) as info:
            ws.recv(timeout=10)
        assert info.value.rcvd.code == 1001 and "idle timeout" in info.value.rcvd.reason
        assert srv.server.metrics.errors["idle_timeout"] == 1


def test_a_full_server_evicts_the_longest_idle_client_for_a_new_one():
    with running_server(max_connections=2, evict_idle_s=0.5) as srv:
        idle, busy = _raw(srv.url), PolicyClient(srv.url)
        idle.send(wire.packb(GOOD))  # it has been served once: it holds its slot until idle
        wire.unpackb(idle.recv(timeout=10))
        time.sleep(0.3)
        busy.infer(GOOD)  # active: never the victim
        time.sleep(0.4)
        with PolicyClient(srv.url) as newcomer:  # full, but `idle` has been idle 0.7 s >= 0.5 s
            assert newcomer.infer(GOOD)["actions"].shape == (3, 2)
            with pytest.raises(websockets.ConnectionClosed) as info:
                idle.recv(timeout=10)
            assert info.value.rcvd.code == 1001 and "evicted: idle" in info.value.rcvd.reason
            assert busy.infer(GOOD)["weight_version"] == 0 and busy.reconnects == 0
        busy.close()


def test_unauthenticated_clients_never_hold_slots_and_metrics_need_the_key():
    key = "secret-key-1"
    with running_server(max_connections=1, api_key=key) as srv:
        with PolicyClient(srv.url, api_key=key) as holder:
            holder.infer(GOOD)
            with pytest.raises(websockets.InvalidStatus) as info:  # at the cap: 401, not 503
                open_sync(srv.url, open_timeout=5)
            assert info.value.response.status_code == 401
        base = f"http://127.0.0.1:{srv.port}"
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as r:
            assert r.status == 200
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{base}/metrics", timeout=5)
        assert err.value.code == 401
        for scheme in ("Api-Key", "Bearer"):
            req = urllib.request.Request(
                f"{base}/metrics", headers={"Authorization": f"{scheme} {key}"}
            )
            with urllib.request.urlopen(req, timeout=5) as r:
                assert b'rlinf_policy_errors_total{kind="unauthorized"}' in r.read()


def test_secrets_come_from_files_or_environment_never_argv(tmp_path, monkeypatch):
    secret = tmp_path / "api_key"
    secret.write_text("file-key-123456\n")
    os.chmod(secret, 0o600)
    assert ServerConfig(api_key_file=str(secret)).with_env_secrets().api_key == "file-key-123456"
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN_FILE", str(secret))
    assert ServerConfig().with_env_secrets().weights_token == "file-key-123456"
    with pytest.raises(ConfigError, match="server.api_key_file.*cannot read"):
        ServerConfig(api_key_file=str(tmp_path / "missing")).with_env_secrets()

    import argparse

    from rlinf_cli import serve

    parser = argparse.ArgumentParser()
    serve.add_parser(parser.add_subparsers())
    for flag in ("--api-key", "--weights-token"):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args(["serve", flag, "x" * 12])
        assert exit_info.value.code == 2
    args = parser.parse_args(["serve", "--checkpoint", "ckpt", "server.api_key=leaked-on-argv"])
    with pytest.raises(ConfigError, match="must not be given on the command line"):
        serve.build_config(args)


def test_clients_keep_retrying_through_a_long_outage():
    first = ServerThread(PolicyServer(TorchPolicy(LinearPolicy()), local_config())).start()
    port = first.port
    client = PolicyClient(
        first.url, backoff_s=0.05, max_backoff_s=0.2, connect_timeout_s=1
    )  # retries=None
    first.stop()
    second = ServerThread(
        PolicyServer(TorchPolicy(LinearPolicy()), local_config(port=port), weight_version=3)
    )
    starter = threading.Timer(3.0, second.start)  # 3 s of outage: more than 10 back-off retries
    starter.start()
    try:
        assert client.infer(GOOD)["weight_version"] == 3 and client.reconnects == 1
    finally:
        starter.join()
        client.close()
        second.stop()


def test_a_retrying_client_stops_when_told():
    srv = ServerThread(PolicyServer(TorchPolicy(LinearPolicy()), local_config())).start()
    client = PolicyClient(srv.url, backoff_s=0.05, max_backoff_s=0.2, connect_timeout_s=1)
    srv.stop()
    outcome: list[BaseException] = []

    def control_loop() -> None:
        try:
            client.infer(GOOD)
        except BaseException as e:
            outcome.append(e)

    worker = threading.Thread(target=control_loop, daemon=True)
    worker.start()
    time.sleep(1.0)
    assert worker.is_alive() and not outcome  # still retrying, nothing raised
    client.stop()
    worker.join(5)
    assert not worker.is_alive() and isinstance(outcome[0], ClientStopped)
