"""What `rlinf train` / `rlinf eval` leave where people look, the time budget, and the
in-process fused path (same numbers as the Ray path)."""

import json
from pathlib import Path

import pytest

from rlinf_cli.main import main

C = "configs/sim_franka_reach_ppo.yaml"
QUIET = ["train.progress=false", "eval.video=false", "eval.num_envs=2", "eval.episodes=2"]


def _history(run: Path) -> list[dict]:
    return json.loads((run / "metrics.json").read_text())["history"]


def test_outputs_of_a_tiny_run_and_its_eval(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", C, "train.iterations=2", f"train.out_dir={run}", *QUIET]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert (
        summary.startswith("sim_franka_reach_ppo: 2 iterations")
        and "eval id" in summary
        and "metrics" in summary
    )
    assert (run / "curves.png").stat().st_size > 1000
    events = b"".join(p.read_bytes() for p in (run / "tb").rglob("events.*"))
    assert b"eval/id/success_rate" in events
    final = json.loads((run / "metrics.json").read_text())["final"]
    assert final["in_process"] is True and final["topology"] == "fused"
    ckpt = run / "checkpoints" / "iter_000002"
    before = sorted(p.name for p in ckpt.iterdir())
    assert main(["eval", str(run), "--episodes", "2", "--video", "eval.num_envs=2"]) == 0
    assert sorted(p.name for p in ckpt.iterdir()) == before  # the checkpoint stays as trained
    result = json.loads((run / "evals" / "iter_000002_seed0" / "results.json").read_text())
    assert result["episodes"] == 2 and (run / "evals" / "iter_000002_seed0" / "eval.mp4").is_file()


def test_time_budget_bounds_training_and_the_final_eval(tmp_path, capsys):
    run = tmp_path / "run"
    budget = 12.0
    assert (
        main(
            [
                "train",
                C,
                "train.iterations=100000",
                f"train.time_budget_s={budget}",
                f"train.out_dir={run}",
                "train.progress=false",
                "eval.video=false",
                "eval.episodes=500",
                "eval.num_envs=25",
            ]
        )
        == 0
    )
    final = json.loads((run / "metrics.json").read_text())["final"]
    # one eval round may start just before the deadline; nothing else runs past it
    assert final["elapsed_s"] <= budget + 6.0, final["elapsed_s"]
    assert 0 < final["eval"]["id"]["episodes"] <= 500
    capsys.readouterr()


@pytest.mark.ray
def test_in_process_run_equals_the_ray_run(tmp_path, capsys):
    common = [
        "train.iterations=3",
        "train.final_eval=false",
        "train.progress=false",
        "train.tensorboard=false",
    ]
    assert main(["train", C, *common, f"train.out_dir={tmp_path / 'local'}"]) == 0
    # a custom resource needs a Ray cluster: the same fused worker, spawned as a Ray actor
    assert (
        main(
            [
                "train",
                C,
                *common,
                f"train.out_dir={tmp_path / 'ray'}",
                "cluster.resources={probe: 1}",
            ]
        )
        == 0
    )
    capsys.readouterr()
    local, ray_run = _history(tmp_path / "local"), _history(tmp_path / "ray")
    keys = ("train/value_loss", "train/policy_loss", "train/approx_kl", "iter/episodes")
    assert [[r.get(k) for k in keys] for r in local] == [[r.get(k) for k in keys] for r in ray_run]
