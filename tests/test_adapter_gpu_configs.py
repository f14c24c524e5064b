"""The GPU configs of the released VLA checkpoints parse, select their adapter and plan the real
load (full-size config, files to read); they are not run here (no GPU, no weights)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from learner.models.adapters.gpu_config import load_gpu_config, load_plan
from rlinf_contracts.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_openvla_gpu_config_plans_the_oft_checkpoint() -> None:
    path = ROOT / "configs/vla_openvla_gpu.yaml"
    assert "not run here" in path.read_text().lower()
    plan = load_plan(load_gpu_config(path))
    cfg = plan["config"]
    assert plan["adapter"] == "openvla_oft" and type(cfg).__name__ == "OftConfig"
    assert (
        cfg.chunk == 8 and cfg.vla.llm.hidden == 4096 and cfg.vla.llm.layers == 32
    )  # the 7B sizes
    assert (
        cfg.vla.llm.tokenizer_vocab == 32000
        and cfg.vla.dino.registers == 4
        and cfg.vla.siglip.dim == 1152
    )
    ckpt = "/models/openvla-7b-oft-finetuned-libero-spatial"
    assert cfg.vla.checkpoint == ckpt and cfg.vla.unnorm_key == "libero_spatial_no_noops"
    assert plan["files"] == [
        f"{ckpt}/*.safetensors",
        f"{ckpt}/dataset_statistics.json",
        f"{ckpt}/tokenizer.model",
    ]
    assert (plan["device"], plan["dtype"]) == ("cuda", "bfloat16")


def test_pi0_gpu_config_plans_the_full_size_model() -> None:
    path = ROOT / "configs/vla_pi0_gpu.yaml"
    assert "not run here" in path.read_text().lower()
    plan = load_plan(load_gpu_config(path))
    cfg = plan["config"]
    assert plan["adapter"] == "pi0" and not cfg.pi05 and cfg.scheme == "mean_std"
    assert cfg.chunk == 50 and cfg.num_steps == 10 and cfg.model_action_dim == 32
    assert (cfg.vlm.width, cfg.vlm.depth, cfg.expert.width, cfg.expert.head_dim) == (
        2048,
        18,
        1024,
        256,
    )
    assert cfg.cameras == ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")
    assert plan["files"][1] == "/models/pi0_libero_pytorch/norm_stats.json"
    pi05 = load_plan(load_gpu_config(path, ["adapter.name=pi05"]))["config"]
    assert pi05.pi05 and pi05.scheme == "quantile"


def test_bad_gpu_configs_name_the_key() -> None:
    path = ROOT / "configs/vla_pi0_gpu.yaml"
    with pytest.raises(ConfigError, match="adapter.name"):
        load_gpu_config(path, ["adapter.name=rt2"])
    with pytest.raises(ConfigError, match="adapter.model.num_step"):
        load_plan(load_gpu_config(path, ["adapter.model.num_step=3"]))
    with pytest.raises(ConfigError, match="adapter.dtype"):
        load_gpu_config(path, ["adapter.dtype=int8"])
