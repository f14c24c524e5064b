"""The GPU check's CPU smoke run: every part (tiny adapters' forward and LoRA step, the policy
server under 1 / 2 clients, osmesa rendering) runs through the same code as on a GPU and reports
ok, results go to the given folder (never benchmarks/results), and the GPU mode refuses a machine
without CUDA at once."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("mujoco")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "MUJOCO_GL": "osmesa"}
ENV["PYOPENGL_PLATFORM"] = "osmesa"


@pytest.mark.slow  # the whole script on CPU (~30 s); the parts' own checks stay in the default tier
def test_smoke_run_reports_every_part_ok(tmp_path: Path) -> None:
    results = ROOT / "benchmarks" / "results" / "gpu_check.json"
    before = results.read_bytes() if results.exists() else None
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--out", str(tmp_path)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rep = json.loads((tmp_path / "gpu_check.json").read_text())
    assert set(rep) == {"meta", "ok", "parts"}
    assert {"command", "machine", "date", "gpu", "profile"} <= set(rep["meta"])
    assert rep["meta"]["profile"] == "smoke" and rep["meta"]["gpu"] is None
    parts = rep["parts"]
    assert set(parts) == {"openvla_oft", "pi0", "policy_server", "render"}
    failed = {k: v.get("error") for k, v in parts.items() if not v["ok"]}
    assert not failed and rep["ok"], failed
    for name in ("openvla_oft", "pi0"):
        r = parts[name]
        assert r["adapter"] == name and r["size"] == "tiny" and r["dtype"] == "bfloat16"
        assert len(r["forward_s"]) == 2 and len(r["train_step_s"]) == 2 and r["trainable_M"] > 0
        assert r["actions_shape"] == [2, r["chunk"], 7]
    server = parts["policy_server"]
    assert set(server["clients"]) == {"1", "2"}
    assert all(c["requests"] > 0 and c["p99_ms"] >= c["p50_ms"] for c in server["clients"].values())
    render = parts["render"]
    assert render["gl"] == "osmesa" and render["px"] == 32 and render["frames_per_s"] > 0
    md = (tmp_path / "gpu_check.md").read_text()
    assert md.startswith("# GPU check") and "Command: `" in md and "Machine: " in md
    after = results.read_bytes() if results.exists() else None
    assert after == before, "a smoke run must not write benchmarks/results"


def test_gpu_mode_stops_at_once_without_cuda() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the GPU mode would run")
    run = subprocess.run(
        [sys.executable, str(SCRIPT)], env=ENV, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 3
    assert "no CUDA device" in run.stderr and "--smoke" in run.stderr


def test_a_failing_part_records_its_error(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    import gpu_check

    bad = dataclasses.replace(gpu_check.PROFILES.get("smoke"), served="rt2")
    gpu_check.run_part_here("policy_server", bad, tmp_path / "r.json")
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["ok"] is False and "rt2" in r["error"] and "Traceback" in r["traceback"]


def test_a_part_past_its_time_box_is_killed_and_recorded() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    import gpu_check

    r = gpu_check.run_part("pi0", gpu_check.PROFILES.get("smoke"), time_box=0.5)
    assert r["ok"] is False and "killed at its 0 s time box" in r["error"]
