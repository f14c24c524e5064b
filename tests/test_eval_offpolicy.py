"""``rlinf eval`` on checkpoints of the off-policy (SAC) and offline (BC) runners, through the CLI.

Each checkpoint records the runner that wrote it; ``rlinf eval`` must rebuild that runner's config
(not the PPO runner's, which rejects ``replay`` / ``data`` sections) and evaluate the actor in the
checkpoint's env. Runs are tiny (a few hundred env steps / updates): the test checks the plumbing
and the numbers' shape, not learning.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlinf_cli.main import main

pytestmark = pytest.mark.sim
TINY = [
    "model.hidden=[32,32]",
    "train.progress=false",
    "train.tensorboard=false",
    "train.final_eval=false",
]


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A tiny SAC run and a tiny BC run on 3 collected push demos, both trained with ``rlinf``."""
    root = tmp_path_factory.mktemp("eval_offpolicy")
    demos = root / "demos"
    assert (
        main(
            [
                "collect",
                "mujoco_franka/push",
                "--episodes",
                "3",
                "--out",
                str(demos),
                "--noise",
                "0.1",
                "control=ee_delta_pos",
            ]
        )
        == 0
    )
    sac, bc = root / "sac", root / "bc"
    assert (
        main(
            [
                "train",
                "configs/sim_franka_push_sac.yaml",
                *TINY,
                "model.critic_hidden=[32,32]",
                "env.num_envs=4",
                "train.env_steps=400",
                "train.warmup_steps=200",
                "train.learning_starts=100",
                "train.log_every=200",
                f"train.out_dir={sac}",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "train",
                "configs/sim_franka_push_bc.yaml",
                *TINY,
                f"data.demos={demos}",
                "train.updates=100",
                "train.log_every=50",
                f"train.out_dir={bc}",
            ]
        )
        == 0
    )
    return {"offpolicy": sac, "offline": bc}


@pytest.mark.parametrize("runner", ["offpolicy", "offline"])
def test_rlinf_eval_reports_per_split_success_of_an_offpolicy_or_offline_checkpoint(
    capsys, tmp_path, runs, runner
):
    out = tmp_path / "ev"
    # both spellings: the positional run dir, and --checkpoint (then the first key=value must stay
    # an override)
    target = ["--checkpoint", str(runs[runner])] if runner == "offpolicy" else [str(runs[runner])]
    splits = {"offpolicy": "id,position", "offline": "id"}[
        runner
    ]  # one split is enough for the second runner
    rc, stdout, _ = _cli(
        capsys,
        "eval",
        *target,
        "eval.num_envs=3",
        "--episodes",
        "5",
        "--ood",
        splits,
        "--no-video",
        "--out",
        str(out),
    )
    assert rc == 0
    result = json.loads(stdout)
    assert result["runner"] == runner
    assert Path(result["checkpoint"]).parent == runs[runner] / "checkpoints"
    assert set(result["splits"]) == set(splits.split(","))
    for split, r in result["splits"].items():
        assert r["episodes"] == 5  # rounds of eval.num_envs=3 (3 + 3), cut to the 5 asked for
        assert isinstance(r["success_rate"], float) and 0.0 <= r["success_rate"] <= 1.0
        assert result["success_rate"][split] == r["success_rate"]
        assert 1 <= r["episode_length"] <= 80  # push episodes end by 80 steps
    assert json.loads((out / "results.json").read_text())["splits"] == result["splits"]
    assert not list(runs[runner].rglob("eval.mp4"))  # --no-video, and never into the run


def test_rlinf_eval_names_a_bad_checkpoint_instead_of_a_traceback(capsys, tmp_path, runs):
    rc, _, err = _cli(capsys, "eval", str(tmp_path / "nowhere"), "--no-video")
    assert rc == 2 and "no checkpoint at" in err and "Traceback" not in err
    rc, _, err = _cli(capsys, "eval", "--no-video")
    assert rc == 2 and "needs a checkpoint" in err
    rc, _, err = _cli(capsys, "eval", str(runs["offline"]), "--checkpoint", str(runs["offpolicy"]))
    assert rc == 2 and "give the checkpoint once" in err

    ckpt = sorted((runs["offpolicy"] / "checkpoints").glob("iter_*"))[-1]
    broken = tmp_path / "broken"
    shutil.copytree(ckpt, broken)
    meta = json.loads((broken / "meta.json").read_text())

    (broken / "meta.json").write_text(json.dumps({**meta, "runner": "offpolicyy"}))
    rc, _, err = _cli(capsys, "eval", str(broken), "--no-video", "--out", str(tmp_path / "o1"))
    assert rc == 2 and "unknown runner 'offpolicyy'" in err and "did you mean 'offpolicy'" in err

    (broken / "meta.json").write_text(
        json.dumps({**meta, "config": {**meta["config"], "replay": {"capacity": 1}}})
    )
    rc, _, err = _cli(capsys, "eval", str(broken), "--no-video", "--out", str(tmp_path / "o2"))
    assert (
        rc == 2 and "replay.capacity" in err
    )  # the runner's own config validation, naming the key

    (broken / "meta.json").write_text("{truncated")
    rc, _, err = _cli(capsys, "eval", str(broken), "--no-video", "--out", str(tmp_path / "o3"))
    assert rc == 2 and "meta.json is unreadable" in err and str(broken) in err

    (broken / "meta.json").write_text(json.dumps(meta))
    (broken / "model.safetensors").unlink()
    rc, _, err = _cli(capsys, "eval", str(broken), "--no-video", "--out", str(tmp_path / "o4"))
    assert rc == 2 and "model.safetensors is missing" in err
