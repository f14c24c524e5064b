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

from learner.checkpoint import save_checkpoint
from rlinf_cli import serve
from rlinf_contracts.config import ConfigError
from learner.models import PolicySpec, build_policy
from policy_server.client import PolicyClient


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
    cfg = serve.build_config(_args(["--config", str(yaml), "--port", "9200", "server.max_wait_ms=7"]))
    assert (cfg.server.port, cfg.server.max_batch, cfg.server.max_wait_ms) == (9200, 4, 7.0)
    assert cfg.server.weights_token == "env-token-12345"
    loaded, version, name = serve.load_served_policy(cfg)
    assert version == 9 and name == "mlp" and loaded.policy.spec.chunk == 2 and loaded.robot_spec.action.chunk == 2
    cfg = serve.build_config(_args(["--checkpoint", str(ckpt), "server.max_batch=3"]))  # no --config
    assert cfg.server.max_batch == 3 and cfg.checkpoint == str(ckpt)
    with pytest.raises(ConfigError, match="exactly one of --checkpoint"):
        serve.build_config(_args(["--port", "1"]))
    with pytest.raises(ConfigError, match="server.max_batch"):
        serve.build_config(_args(["--checkpoint", str(ckpt), "--max-batch", "0"]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rlinf_serve_process_answers_health_and_inference(tmp_path):
    yaml = tmp_path / "serve.yaml"
    yaml.write_text("policy:\n  name: mlp\n  spec: {state_dim: 3, action_dim: 2, chunk: 4}\n"
                    "  kwargs: {hidden: [8]}\n")
    port = _free_port()
    cmd = [sys.executable, "-m", "rlinf_cli.main", "serve", "--config", str(yaml),
           "--host", "127.0.0.1", "--port", str(port)]
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.time() < deadline, "server did not come up within 60 s"
                time.sleep(0.2)
        with PolicyClient(f"ws://127.0.0.1:{port}") as client:
            out = client.infer({"state": np.zeros(3, np.float32)})
        assert out["actions"].shape == (4, 2) and client.metadata.policy_name == "mlp"
    finally:
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=30)[0]
    assert proc.returncode in (0, 130), output
    assert "listening on ws://127.0.0.1" in output and "client" in output
