"""The `rlinf` entry point as a user runs it: help, config errors, dry runs, bad paths."""

import json
import subprocess
import sys

import pytest

from rlinf_cli.main import main

RLINF = [sys.executable, "-m", "rlinf_cli.main"]


def test_help_lists_the_subcommands():
    out = subprocess.run([*RLINF, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for sub in ("train", "eval", "serve", "ros", "config"):
        assert f"    {sub}" in out.stdout


def test_dry_run_resolves_config_with_overrides(capsys, tmp_path):
    assert (
        main(
            [
                "train",
                "configs/sim_franka_reach_ppo.yaml",
                "actor.lr=3e-4",
                "placement.env,rollout,actor=0",
                f"train.out_dir={tmp_path}",  # the default runs/<name> may hold a run
                "--dry-run",
            ]
        )
        == 0
    )
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["actor"]["lr"] == 3e-4 and cfg["env"]["name"] == "mujoco_franka/reach"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["actor.ephocs=3"], "unknown key 'actor.ephocs'. Did you mean 'actor.epochs'?"),
        (["actor.epochs=many"], "key 'actor.epochs' expects int, got str 'many'"),
        (["runner=embodid"], "key 'runner': unknown runner 'embodid'; did you mean 'embodied'?"),
        (
            ["eval.env=mujoco_franka/lfit"],
            "key 'eval.env': unknown mujoco_franka task 'lfit'. Did you mean 'mujoco_franka/lift'?",
        ),
        (
            ["eval.env=franka_language/mix"],
            "key 'eval.env' (franka_language/mix) must be a task of env.name's family",
        ),
        (
            ["train.init_skip=[head.log_sigma]"],
            "key 'train.init_skip' (['head.log_sigma']) needs train.init_from",
        ),
    ],
)
def test_config_errors_name_the_key_and_exit_2(overrides, message, capsys):
    assert main(["train", "configs/sim_franka_reach_ppo.yaml", *overrides, "--dry-run"]) == 2
    assert message in capsys.readouterr().err


def test_missing_files_are_reported_not_raised(capsys, tmp_path):
    assert main(["train", str(tmp_path / "nope.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err
    assert main(["eval", str(tmp_path)]) == 2
    assert "no checkpoint at" in capsys.readouterr().err


# shipped configs that read weights an earlier runbook step trains, and what a dry run says of them
NEEDS_LOCAL_WEIGHTS = {
    "reward_classifier_push.yaml": (
        "runs/encoder_pretrain_front",
        "'rlinf train configs/encoder_pretrain.yaml train.out_dir=runs/encoder_pretrain_front'",
    ),
}


def test_every_shipped_config_validates(capsys, tmp_path):
    from pathlib import Path

    for path in sorted(Path("configs").glob("*.yaml")):
        # a fresh out_dir: a dry run refuses one that already holds a run, as the real run does
        out = f"train.out_dir={tmp_path / path.stem}"
        if path.name.startswith("ros_"):
            continue  # ROS graph configs are validated by `rlinf ros` (tests/rlinf_ros)
        if path.name.startswith("vla_") and path.stem.endswith("_gpu"):
            # full-size VLA training configs: the checkpoint is not on this machine, the error names
            # the key
            assert main(["train", str(path), out, "--dry-run"]) == 2, path
            assert "key 'adapter.checkpoint': no checkpoint directory" in capsys.readouterr().err
            continue
        weights, message = NEEDS_LOCAL_WEIGHTS.get(path.name, ("", ""))
        if weights and not Path(weights).exists():
            # weights a runbook step makes first: the dry run names the key and the command
            assert main(["train", str(path), out, "--dry-run"]) == 2, path
            assert message in capsys.readouterr().err, path
            continue
        assert main(["train", str(path), out, "--dry-run"]) == 0, path
    capsys.readouterr()


def test_config_subcommand_lists_keys_with_help(capsys):
    assert main(["config", "embodied"]) == 0
    out = capsys.readouterr().out
    assert "actor.lr (float" in out and "placement" in out


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["env.name=franka_language/hadr", "--dry-run"],
            "key 'env.name': unknown franka_language task 'hadr'. Did you mean "
            "'franka_language/hard'?",
        ),
        (
            ["eval.env=franka_language/mixx", "--dry-run"],
            "key 'eval.env': unknown franka_language task 'mixx'. Did you mean "
            "'franka_language/mix'?",
        ),
        # model kwargs are the model's to check: it does so when built, before any rollout
        (
            [
                "model.kwargs.slot_camera={pos:[0.3,0,0.5],lookat:[0,0,0]}",
                "model.kwargs.text_encoder=hash",
                "train.init_from=null",
                "env.num_envs=2",
            ],
            "config error: model 'vla_flow': model.kwargs.slot_camera needs pos: [x, y, z] and "
            "look_at",
        ),
    ],
)
def test_language_vla_config_errors_name_the_key(overrides, message, capsys, tmp_path):
    import os

    cores = os.sched_getaffinity(0)
    out = f"train.out_dir={tmp_path}"  # the default runs/<name> may hold a run
    assert main(["train", "configs/sim_franka_language_vla_flow_ppo.yaml", *overrides, out]) == 2
    assert message in capsys.readouterr().err
    # a run that fails while its in-process worker starts gives the process its cores back
    assert os.sched_getaffinity(0) == cores
