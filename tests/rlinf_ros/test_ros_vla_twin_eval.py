"""Must-show, end to end (slow, minutes): a small VLA trained here, served by ``rlinf serve`` and
driven through the ROS 2 language twin, succeeds as often as ``rlinf eval`` says it does.

Pipeline of ``benchmarks/vla_ros.py`` at test size: oracle demos -> SFT (``vla_tokens``) ->
``rlinf eval`` on held-out seeds -> ``rlinf serve`` + robot / policy client / task nodes replaying
the same episodes (``scene_seed = eval.seed_offset``). The twin's success rate must be within
0.1 of the sim eval's, and the policy must be better than nothing (else agreement is trivial).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mujoco", reason="needs the sim extra")

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.slow, pytest.mark.timeout(1500)]

EPISODES = 30


def _bench():
    spec = importlib.util.spec_from_file_location("vla_ros_bench", ROOT / "benchmarks/vla_ros.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["vla_ros_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_served_vla_on_the_ros_twin_matches_the_sim_eval(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    bench = _bench()
    args = type("Args", (), {"work": str(tmp_path), "demos_dir": "", "demos": 100, "sft_steps": 600})()
    ckpt, _ = bench.train_checkpoint(args)
    sim = bench.sim_eval(ckpt, "id", EPISODES)
    twin = bench.twin_eval(ckpt, "id", EPISODES, tmp_path / "twin", timeout_s=900)
    assert sim["episodes"] == twin["episodes"] == EPISODES
    assert sim["success_rate"] >= 0.15, f"the SFT policy is too weak for a meaningful comparison: {sim}"
    assert abs(twin["success_rate"] - sim["success_rate"]) <= 0.1, (sim, twin)
