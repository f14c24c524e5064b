"""SFT -> RL through the real CLI and runners, tiny: collect demos, SFT, PPO / GRPO from the
SFT checkpoint, eval per split. Seconds, not a learning test (benchmarks/vla_ood.py is)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from learner.checkpoint import load_checkpoint
from rlinf_cli.main import main

TINY_ENV = [
    "env.kwargs.image_size=32",
    "model.kwargs.text_encoder=hash",
    "model.hidden=[32]",
    "model.image_feat_dim=16",
    "model.cnn_channels=[8,8,8]",
    "train.progress=false",
    "eval.episodes=4",
    "eval.num_envs=4",
]


def _grounding():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "vla_grounding.py"
    spec = importlib.util.spec_from_file_location("vla_grounding", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    out = tmp_path_factory.mktemp("vla") / "demos"
    assert (
        main(
            [
                "collect",
                "franka_language/mix",
                "--episodes",
                "3",
                "--obs-mode",
                "state+rgb",
                "--noise",
                "0.1",
                "--out",
                str(out),
                "cameras=[front]",
                "image_size=32",
            ]
        )
        == 0
    )
    return out


@pytest.mark.parametrize("head", ["tokens", "flow"])
def test_sft_then_ppo_and_grpo_from_the_sft_checkpoint(demos, tmp_path, head, capsys):
    sft_dir, ppo_dir, grpo_dir = tmp_path / "sft", tmp_path / "ppo", tmp_path / "grpo"
    assert (
        main(
            [
                "train",
                f"configs/sim_franka_language_vla_{head}_sft.yaml",
                f"sft.demos={demos}",
                "sft.steps=5",
                "train.log_every=5",
                f"train.out_dir={sft_dir}",
                "eval.ood_splits=[id,semantic]",
                *TINY_ENV,
            ]
        )
        == 0
    )
    sft = json.loads((sft_dir / "metrics.json").read_text())["final"]
    assert set(sft["eval"]) == {"id", "semantic"} and sft["demo_steps"] > 3
    # rlinf eval takes the SFT checkpoint (its runner's config) and reports every split asked for
    assert (
        main(
            [
                "eval",
                str(sft_dir),
                "--episodes",
                "2",
                "--ood",
                "id,vision",
                "--no-video",
                "--out",
                str(tmp_path / "eval"),
                "eval.num_envs=2",
            ]
        )
        == 0
    )
    report = json.loads(next((tmp_path / "eval").glob("*.json")).read_text())
    assert set(report["success_rate"]) == {"id", "vision"}
    # the grounding diagnosis (benchmarks/vla_grounding.py) reads the same checkpoint
    grounding = _grounding().diagnose(str(sft_dir), 4, num_envs=2)
    assert sum(n for _, n in grounding["cells"].values()) == grounding["episodes"] == 4
    assert set(grounding["pointer"]) <= {"named", "colour"} and all(
        0 <= v <= 1 for v in grounding["pointer"].values()
    )
    sft_state = load_checkpoint(sft_dir).model_state
    assert (
        main(
            [
                "train",
                f"configs/sim_franka_language_vla_{head}_ppo.yaml",
                f"train.init_from={sft_dir}",
                "train.iterations=1",
                "env.num_envs=2",
                "rollout.steps_per_iteration=2",
                f"train.out_dir={ppo_dir}",
                "eval.ood_splits=[id]",
                *TINY_ENV,
            ]
        )
        == 0
    )
    ppo = json.loads((ppo_dir / "metrics.json").read_text())
    assert np.isfinite(ppo["history"][-1]["train/policy_loss"])
    ppo_state = load_checkpoint(ppo_dir).model_state
    # RL started from the SFT weights (the frozen-text projection is trained, so compare a conv)
    key = "cnn.conv1.weight"
    diff = float((ppo_state[key] - sft_state[key]).abs().max())
    assert 0.0 < diff < 0.05, diff
    grpo = [
        "train",
        f"configs/sim_franka_language_vla_{head}_grpo.yaml",
        f"train.init_from={sft_dir}",
        "train.iterations=1",
        "env.num_envs=4",
        "algorithm.group_size=2",
        "env.max_episode_steps=8",
        f"train.out_dir={grpo_dir}",
        "eval.ood_splits=[id]",
        *TINY_ENV,
    ]
    # the RL stage sets its own exploration noise; SFT's (never trained) is not loaded
    if head == "flow":
        assert main([*grpo, "train.init_skip=[head.log_sigmaa]"]) == 2
        assert (
            "key 'train.init_skip' names ['head.log_sigmaa'], which match no tensor"
            in capsys.readouterr().err
        )
        grpo += ["train.init_skip=[head.log_sigma]", "model.kwargs.init_log_sigma=-0.5"]
    assert main(grpo) == 0
    assert (
        json.loads((grpo_dir / "metrics.json").read_text())["final"]["eval"]["id"]["episodes"] == 4
    )
    if head == "flow":
        log_sigma = load_checkpoint(grpo_dir).model_state["head.log_sigma"]
        assert (
            float((log_sigma + 0.5).abs().max()) < 0.01
            and float(sft_state["head.log_sigma"].max()) < -1.0
        )
