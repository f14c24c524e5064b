"""``rlinf train CONFIG --seeds N``: one run directory per seed, the aggregate report, a failing
seed reported while the others finish, and one-line errors for a bad ``--seeds``."""

import json
import os
import sys
from pathlib import Path

import pytest

import rlinf_cli.seeds as seeds_mod
from rlinf_cli.main import main
from rlinf_cli.seeds import SeedPlan, cores_per_seed, run_seeds
from rlinf_cli.train import build

C = "configs/sim_franka_reach_ppo.yaml"
QUIET = ["eval.video=false", "eval.num_envs=2", "eval.episodes=2"]

# a stand-in seed: writes a run directory like a runner (success = seed / 10) and records the
# cores and pinning it ran with; or exits with the status the test gives it
FAKE = """
import json, os, sys
from pathlib import Path
out, seed, code = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print("training seed", seed)
if code:
    sys.exit(code)
out.mkdir(parents=True, exist_ok=True)
rows = [{"iteration": i, "time/wall_s": 1.0 + i, "env_steps": 10 * i, "success_rate": seed / 10}
        for i in range(3)]
final = {"iterations": 3, "elapsed_s": 3.0, "checkpoint": None, "success_rate": seed / 10,
         "eval": {"id": {"success_rate": seed / 10, "episodes": 2}},
         "cores": sorted(os.sched_getaffinity(0)), "pin": os.environ.get("RLINF_PIN_CPUS")}
(out / "metrics.json").write_text(json.dumps({"final": final, "history": rows}))
"""


@pytest.fixture
def fake_seeds(monkeypatch):
    """Seeds run :data:`FAKE` instead of a training; ``fail[seed]`` is a seed's exit status."""
    fail: dict[int, int] = {}

    def command(plan: SeedPlan, seed: int) -> list[str]:
        out = plan.out_dir / f"seed_{seed}"
        return [sys.executable, "-c", FAKE, str(out), str(seed), str(fail.get(seed, 0))]

    monkeypatch.setattr(seeds_mod, "seed_command", command)
    monkeypatch.setattr(seeds_mod, "POLL_S", 0.05)
    return fail


def test_two_seeds_of_a_tiny_training(tmp_path, capsys):
    out = tmp_path / "runs"
    argv = ["train", C, "--seeds", "2", "train.iterations=2", f"train.out_dir={out}", *QUIET]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    for seed in (0, 1):
        run = json.loads((out / f"seed_{seed}" / "metrics.json").read_text())
        assert run["final"]["iterations"] == 2 and len(run["history"]) == 2
        assert (out / f"seed_{seed}" / "train.log").is_file()
        assert any(line.startswith(f"seed {seed}: started") for line in lines)
        assert any(line.startswith(f"seed {seed}: finished in") for line in lines)
    # the seeds really differ: seed k trains under seed=k
    losses = [
        [
            r["train/value_loss"]
            for r in json.loads((out / f"seed_{s}" / "metrics.json").read_text())["history"]
        ]
        for s in (0, 1)
    ]
    assert losses[0] != losses[1]
    report = json.loads((out / "seeds.json").read_text())
    assert report["finished"] == [0, 1] and report["failed"] == []
    for name in ("eval/id/success_rate", "success_rate"):
        m = report["metrics"][name]
        assert len(m["values"]) == 2 and len(m["ci"]) == 2
        assert m["ci"][0] <= m["iqm"] <= m["ci"][1]
    assert (out / "seeds.png").stat().st_size > 1000
    assert "| eval/id/success_rate |" in (out / "seeds.md").read_text()
    assert lines[-1].startswith("seeds: 2 of 2 finished; eval/id/success_rate IQM")

    # a seed run cannot resume: each seed has its own directory (a real checkpoint, so the
    # train.resume preflight passes and --seeds is what refuses)
    ckpt = out / "seed_0" / "checkpoints" / "iter_000002"
    assert main(["train", C, "--seeds", "2", f"train.resume={ckpt}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlinf train: config error: --seeds cannot resume") and "\n" not in err


def test_a_failing_seed_is_reported_and_the_others_finish(tmp_path, capsys, fake_seeds):
    fake_seeds[1] = 3
    out = tmp_path / "runs"
    assert main(["train", C, "--seeds", "0,1,2", f"train.out_dir={out}"]) == 1
    text = capsys.readouterr().out
    log = out / "seed_1" / "train.log"
    assert f"seed 1: FAILED with exit status 3; log {log}" in text
    assert "training seed 1" in log.read_text()
    assert "seed 2: finished in" in text and "eval/id/success_rate 0.20" in text
    report = json.loads((out / "seeds.json").read_text())
    assert report["finished"] == [0, 2]
    assert report["failed"] == [{"seed": 1, "exit_code": 3, "log": str(log)}]
    assert report["metrics"]["success_rate"]["values"] == [0.0, 0.2]
    assert "- seed 1: exit 3" in (out / "seeds.md").read_text()
    assert text.strip().splitlines()[-1].startswith("seeds: 2 of 3 finished; failed 1 (exit 3)")


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True,
    reason="side-by-side seeds need two cores",
)
def test_side_by_side_seeds_each_get_their_own_core(tmp_path, capsys, fake_seeds):
    plan = SeedPlan(C, [], tmp_path, [0, 1, 2], parallel=2, cores_per_seed=1)
    assert run_seeds(plan) == 0
    finals = [
        json.loads((tmp_path / f"seed_{s}" / "metrics.json").read_text())["final"] for s in range(3)
    ]
    assert all(len(f["cores"]) == 1 and f["pin"] == "0" for f in finals)
    assert finals[0]["cores"] != finals[1]["cores"]  # the first two ran at once, on two cores
    capsys.readouterr()


def test_one_at_a_time_leaves_pinning_to_the_runner(tmp_path, capsys, fake_seeds):
    assert run_seeds(SeedPlan(C, [], tmp_path, [4], parallel=1)) == 0
    final = json.loads((tmp_path / "seed_4" / "metrics.json").read_text())["final"]
    assert final["pin"] == os.environ.get("RLINF_PIN_CPUS")
    assert "seed 4: finished" in capsys.readouterr().out


def test_cores_per_seed_of_the_placement():
    assert cores_per_seed(*build(C, [])) == 1  # the fused default: one process on slot 0
    # three processes on three slots need Ray: the seeds run one after another
    split = ["placement={env: 0, rollout: 0, actor: 1}"]
    assert cores_per_seed(*build(C, split + ["cluster.num_cpus=2"])) is None


@pytest.mark.parametrize("value", ["0", "-1", "a", "1,1", "2,", "", "1.5"])
def test_a_bad_seeds_value_is_one_line(value, capsys):
    assert main(["train", C, "--seeds", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"rlinf train: config error: --seeds {value}")
    assert "\n" not in err and "Traceback" not in err


def test_help_names_the_flag(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--seeds N|S,S,..." in capsys.readouterr().out


def test_seed_command_repeats_the_config_under_each_seed(tmp_path):
    plan = SeedPlan(C, ["actor.lr=1e-3"], tmp_path, [0, 5], extra_args=["--ray-address", "h:1"])
    argv = seeds_mod.seed_command(plan, 5)
    assert argv[1:5] == ["-m", "rlinf_cli.main", "train", C]
    assert argv[5:] == [
        "--ray-address",
        "h:1",
        "actor.lr=1e-3",
        "seed=5",
        f"train.out_dir={Path(tmp_path) / 'seed_5'}",
    ]
