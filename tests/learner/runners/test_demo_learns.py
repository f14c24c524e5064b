"""`make demo` learns: the README's first command, as it ships, reaches the held-out success it
promises.

Why a slow-tier test and not a benchmark: a refactor of the learner (worker roles, the algorithm
protocol, the run format) can keep every unit test green and still stop the demo from learning;
this is the check that fails then. It runs the demo config unchanged except for its outputs (no
video, a temporary run directory) and the final evaluation's size.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlinf_cli.main import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_make_demo_reaches_held_out_success(tmp_path: Path) -> None:
    rc = main(
        [
            "train",
            str(ROOT / "configs/sim_franka_reach_ppo.yaml"),
            f"train.out_dir={tmp_path}",
            "train.progress=false",
            "eval.video=false",
            "eval.episodes=50",
        ]
    )
    assert rc == 0
    final = json.loads((tmp_path / "metrics.json").read_text())["final"]
    held_out = final["eval"]["id"]["success_rate"]
    # the README and benchmarks/results/sim_learning.md: 1.00 held-out on reach from state
    assert held_out >= 0.9, final["eval"]
