"""``rlinf serve``: config building, checkpoint loading, and a real server process."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
import websockets

from learner.checkpoint import save_checkpoint
from learner.models import PolicySpec, build_policy
from policy_server.client import PolicyClient, open_sync
from rlinf_cli import serve
from rlinf_contracts.config import ConfigError


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.add_parser(parser.add_subparsers())
    return parser.parse_args(["serve", *argv])


def test_flags_override_the_config_file_and_checkpoint_loads(tmp_path, monkeypatch):
    policy = build_policy("mlp", PolicySpec(state_dim=5, action_dim=3, chunk=2), hidden=[16])
    ckpt = save_checkpoint(tmp_path / "ckpt", policy, iteration=4, weight_version=9)
    yaml = tmp_path / "serve.yaml"
    yaml.write_text(f"checkpoint: {ckpt}\nserver:\n  port: 9100\n  max_batch: 4\n")
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN", "env-token-12345")
    cfg = serve.build_config(
        _args(["--config", str(yaml), "--port", "9200", "server.max_wait_ms=7"])
    )
    assert (cfg.server.port, cfg.server.max_batch, cfg.server.max_wait_ms) == (9200, 4, 7.0)
    assert cfg.server.weights_token == "env-token-12345"
    loaded, version, name = serve.load_served_policy(cfg)
    assert (
        version == 9
        and name == "mlp"
        and loaded.policy.spec.chunk == 2
        and loaded.robot_spec.action.chunk == 2
    )
    cfg = serve.build_config(
        _args(["--checkpoint", str(ckpt), "server.max_batch=3"])
    )  # no --config
    assert cfg.server.max_batch == 3 and cfg.checkpoint == str(ckpt)
    with pytest.raises(ConfigError, match="exactly one of --checkpoint"):
        serve.build_config(_args(["--port", "1"]))
    with pytest.raises(ConfigError, match="server.max_batch"):
        serve.build_config(_args(["--checkpoint", str(ckpt), "--max-batch", "0"]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_serve(tmp_path) -> tuple[subprocess.Popen, int]:
    """A real ``rlinf serve`` process of a tiny fresh model, once /healthz answers."""
    yaml = tmp_path / "serve.yaml"
    yaml.write_text(
        "policy:\n  name: mlp\n  spec: {state_dim: 3, action_dim: 2, chunk: 4}\n"
        "  kwargs: {hidden: [8]}\n"
    )
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "rlinf_cli.main",
        "serve",
        "--config",
        str(yaml),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                assert r.status == 200
                return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(
                    f"rlinf serve did not come up within 120 s:\n{proc.communicate(timeout=30)[0]}"
                )
            time.sleep(0.2)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_rlinf_serve_process_serves_then_stops_on_a_signal_with_exit_0(tmp_path, sig):
    proc, port = _start_serve(tmp_path)
    try:
        with PolicyClient(f"ws://127.0.0.1:{port}") as client:
            out = client.infer({"state": np.zeros(3, np.float32)})
        assert out["actions"].shape == (4, 2) and client.metadata.policy_name == "mlp"
        held = open_sync(f"ws://127.0.0.1:{port}", open_timeout=30)  # open while the signal arrives
        held.recv(timeout=30)  # metadata
        proc.send_signal(sig)
        with pytest.raises(websockets.ConnectionClosed) as info:
            held.recv(timeout=60)
        assert (
            info.value.rcvd is not None and info.value.rcvd.code == 1001
        )  # going away, not dropped
        output = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, output
    assert "listening on ws://127.0.0.1" in output and "client" in output
    assert "signal received" in output and "Traceback" not in output, output
