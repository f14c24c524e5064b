"""Camera-only push end to end (slow tier): scripted demos recorded from two cameras, the encoder
pretrained on their frames, then a few hundred RLPD updates of the pixel push configs -- the
frozen encoder (features in the replay) and the trainable CNN -- and the served checkpoint acts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.sim]

ROOT = Path(__file__).resolve().parents[3]
SMALL = ["control=ee_delta_pos", "cameras=[front,wrist]", "image_size=32"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from learner.runners.encoder_pretrain import EncoderPretrainConfig, run
    from rlinf_contracts.config import from_dict, load_config

    tmp = tmp_path_factory.mktemp("pixel_push")
    demos = tmp / "demos"
    cmd = [sys.executable, "-m", "rlinf_cli.main", "collect", "mujoco_franka/push"]
    args = ["--episodes", "4", "--noise", "0.1", "--obs-mode", "rgb", "--out", str(demos)]
    subprocess.run(cmd + args + SMALL, cwd=ROOT, check=True, capture_output=True, timeout=300)
    over = [
        f"data.stores=[{demos}]",
        f"data.action_stores=[{demos}]",
        "train.updates=20",
        "train.batch_size=16",
        "train.log_every=10",
        f"train.out_dir={tmp / 'encoder'}",
    ]
    run(
        from_dict(EncoderPretrainConfig, load_config(ROOT / "configs/encoder_pretrain.yaml", over)),
        None,
    )
    return {"demos": demos, "encoder": tmp / "encoder", "tmp": tmp}


@pytest.mark.parametrize(
    "config", ["sim_franka_push_rlpd_pixels.yaml", "sim_franka_push_rlpd_pixels_cnn.yaml"]
)
def test_pixel_push_trains_end_to_end(data: dict[str, Path], config: str) -> None:
    import torch

    from learner.checkpoint import load_policy
    from learner.cluster import InProcess
    from learner.offpolicy.config import OffPolicyConfig
    from learner.runners import get_runner
    from rlinf_contracts.config import from_dict, load_config

    out = data["tmp"] / config.removesuffix(".yaml")
    over = [
        'placement={"env,learner,replay": "0"}',  # one fused process: no Ray here
        f"train.demos={data['demos']}",
        f"model.encoder.weights={data['encoder']}",
        "env.num_envs=2",
        "env.kwargs.image_size=32",
        "algorithm.batch_size=32",
        "algorithm.utd_ratio=1.0",
        "train.env_steps=400",
        "train.learning_starts=100",
        "train.log_every=100",
        "train.progress=false",
        "train.tensorboard=false",
        "eval.episodes=2",
        "eval.num_envs=2",
        f"train.out_dir={out}",
    ]
    if config.endswith("_cnn.yaml"):
        over.remove(f"model.encoder.weights={data['encoder']}")
    cfg = from_dict(OffPolicyConfig, load_config(ROOT / "configs" / config, over))
    final = get_runner("offpolicy").run(cfg, InProcess(2))
    assert final["updates"] >= 250
    assert all(np.isfinite(split["success_rate"]) for split in final["eval"].values())
    policy, _ = load_policy(out)
    obs = {
        "state": torch.zeros(1, policy.spec.state_dim),
        "images": {c: torch.zeros(1, 32, 32, 3, dtype=torch.uint8) for c in ("front", "wrist")},
    }
    assert policy(obs).dist.mode().shape == (1, 1, policy.spec.action_dim)
