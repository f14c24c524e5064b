"""Each full-size VLA adapter end to end on a tiny random-weight model with the real key layout:
load from a safetensors file with the checkpoint's names, act, log-prob, one training step
(LoRA and heads move, frozen weights don't), and serve through the policy interface."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from safetensors.torch import save_file  # noqa: E402

from learner.models.adapters import build_adapter  # noqa: E402
from learner.models.adapters.common import LoraSpec, serve  # noqa: E402
from learner.models.adapters.openvla import OpenVlaConfig  # noqa: E402
from learner.models.adapters.openvla_oft import OftConfig  # noqa: E402
from learner.models.adapters.pi0 import Pi0Config  # noqa: E402
from policy_server.policy import check_policy  # noqa: E402

ACT = {"q01": [-0.05] * 6 + [0.0], "q99": [0.05] * 6 + [1.0], "mask": [True] * 6 + [False]}
PI_STATS = {
    "state": {"mean": [0.1] * 8, "std": [0.5] * 8, "q01": [-1.0] * 8, "q99": [1.0] * 8},
    "actions": {"mean": [0.0] * 7, "std": [0.2] * 7, "q01": [-0.5] * 7, "q99": [0.5] * 7},
}


def openvla_cfg(rank: int, ckpt: str = "") -> OpenVlaConfig:
    return OpenVlaConfig.tiny(norm_stats=ACT, checkpoint=ckpt, lora=LoraSpec(rank=rank, alpha=8))


def oft_cfg(rank: int, ckpt: str = "") -> OftConfig:
    cfg = OftConfig.tiny(norm_stats=ACT, checkpoint=ckpt)
    cfg.vla.lora = LoraSpec(rank=rank, alpha=8)
    return cfg


def pi_cfg(pi05: bool) -> Callable[[int, str], Pi0Config]:
    return lambda rank, ckpt="": Pi0Config.tiny(
        pi05=pi05, norm_stats=PI_STATS, checkpoint=ckpt, lora=LoraSpec(rank=rank, alpha=8)
    )


# adapter name, config builder, camera, real key names that must be in the saved file
CASES: dict[str, tuple[str, Callable[..., Any], str, list[str]]] = {
    "openvla": (
        "openvla",
        openvla_cfg,
        "primary",
        [
            "vision_backbone.featurizer.blocks.0.attn.qkv.weight",
            "vision_backbone.featurizer.reg_token",
            "vision_backbone.featurizer.blocks.0.ls1.scale_factor",
            "vision_backbone.fused_featurizer.patch_embed.proj.weight",
            "projector.fc3.weight",
            "language_model.model.layers.0.self_attn.q_proj.weight",
            "language_model.lm_head.weight",
        ],
    ),
    "openvla_oft": (
        "openvla_oft",
        oft_cfg,
        "primary",
        [
            "language_model.model.layers.1.mlp.down_proj.weight",
            "action_head.model.fc1.weight",
            "action_head.model.mlp_resnet_blocks.1.ffn.1.weight",
            "proprio_projector.fc2.weight",
        ],
    ),
    "pi0": (
        "pi0",
        pi_cfg(False),
        "base_0_rgb",
        [
            "paligemma_with_expert.paligemma.model.vision_tower.encoder.layers.0.self_attn.q_proj.weight",
            "paligemma_with_expert.paligemma.model.multi_modal_projector.linear.weight",
            "paligemma_with_expert.paligemma.model.language_model.layers.0.self_attn.q_proj.weight",
            "paligemma_with_expert.gemma_expert.model.layers.1.mlp.gate_proj.weight",
            "state_proj.weight",
            "action_in_proj.weight",
            "action_out_proj.bias",
            "action_time_mlp_in.weight",
        ],
    ),
    "pi05": (
        "pi05",
        pi_cfg(True),
        "base_0_rgb",
        [
            "paligemma_with_expert.gemma_expert.model.layers.0.input_layernorm.dense.weight",
            "paligemma_with_expert.gemma_expert.model.norm.dense.bias",
            "time_mlp_in.weight",
            "time_mlp_out.weight",
        ],
    ),
}


def observation(cam: str, b: int = 2) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {
        "state": rng.normal(0, 0.3, (b, 8)).astype(np.float32),
        "images": {cam: rng.integers(0, 255, (b, 40, 40, 3), dtype=np.uint8)},
        "instruction": ["pick up the red cube", "push the blue ball"][:b],
    }


@pytest.mark.parametrize("case", list(CASES))
def test_tiny_model_loads_acts_scores_trains_and_serves(case: str, tmp_path: Path) -> None:
    name, make_cfg, cam, keys = CASES[case]
    torch.manual_seed(0)
    # 1. a "checkpoint": the network without LoRA, saved under the real key names
    source = build_adapter(name, cfg=make_cfg(0))
    state = {
        k: v.contiguous().clone() for k, v in source.state_dict().items()
    }  # tied embeddings: own copies
    missing = [k for k in keys if k not in state]
    assert not missing, f"not the real key layout: {missing}"
    path = tmp_path / "model.safetensors"
    save_file(state, str(path))
    torch.manual_seed(1)  # different random init: only loading can make the weights equal
    adapter = build_adapter(name, cfg=make_cfg(4, str(path)))
    loaded = {
        k.replace("base_model.model.", "").replace(".base_layer", ""): v
        for k, v in adapter.state_dict().items()
        if "lora_" not in k
    }
    assert set(loaded) == set(state)
    assert all(torch.equal(loaded[k], state[k]) for k in state)

    # 2. act: robot-unit chunks; 3. log-prob scores the sampled chunk as act did
    obs = observation(cam)
    torch.manual_seed(2)
    out = adapter.act(obs, deterministic=False)
    assert out.actions.shape == (2, adapter.chunk, 7) and np.all(np.isfinite(out.actions))
    logp = adapter.log_prob(obs, out.extras)
    assert logp.shape == (2,) and logp.requires_grad
    np.testing.assert_allclose(logp.detach().numpy(), out.log_prob, rtol=1e-4, atol=1e-3)

    # 4. one policy-gradient step on the sampled chunk: trainable weights move, frozen ones don't
    params = dict(adapter.named_parameters())
    trainable = {k for k, p in params.items() if p.requires_grad}
    assert any("lora_B" in k for k in trainable)
    assert not any(
        "lora_" not in k and ("language_model" in k or "gemma_expert" in k or "vision" in k)
        for k in trainable
    ), "backbone weights must be frozen (LoRA trains them)"
    before = {k: p.detach().clone() for k, p in params.items()}
    (-logp.mean()).backward()
    g2 = sum(
        float(p.grad.pow(2).sum()) for p in adapter.trainable_parameters() if p.grad is not None
    )
    # plain gradient step sized to raise the mean log-prob by ~1e-3 to first order
    torch.optim.SGD(adapter.trainable_parameters(), lr=1e-3 / g2).step()
    changed = {k for k, p in params.items() if not torch.equal(p.detach(), before[k])}
    assert changed and changed <= trainable
    assert any("lora_B" in k for k in changed)
    gain = adapter.log_prob(obs, out.extras).mean().item() - logp.mean().item()
    assert 2e-4 < gain < 5e-3, gain  # the step raised it, as the gradient predicts

    # 5. serve: the policy server's interface, batched observation in, [B, chunk, A] out
    served = check_policy(serve(adapter))
    assert served.robot_spec.action.dim == 7 and served.robot_spec.action.chunk == adapter.chunk
    got = served.infer(observation(cam, 1))
    assert got["actions"].shape == (1, adapter.chunk, 7) and got["actions"].dtype == np.float32


def test_a_checkpoint_of_another_size_is_refused_with_names(tmp_path: Path) -> None:
    save_file({"projector.fc1.weight": torch.zeros(3, 3)}, str(tmp_path / "bad.safetensors"))
    with pytest.raises(ValueError, match="(?s)do not fit.*size mismatch for projector.fc1.weight"):
        build_adapter("openvla", cfg=openvla_cfg(0, str(tmp_path / "bad.safetensors")))
    save_file({"projector.fc1.weight": torch.zeros(224, 56)}, str(tmp_path / "part.safetensors"))
    with pytest.raises(ValueError, match="missing .*language_model"):
        build_adapter("openvla", cfg=openvla_cfg(0, str(tmp_path / "part.safetensors")))


def test_openvla_deterministic_actions_are_bin_centres_within_the_dataset_bounds() -> None:
    torch.manual_seed(0)
    adapter = build_adapter("openvla", cfg=openvla_cfg(0))
    out = adapter.act(observation("primary"))
    assert np.all(out.actions[..., :6] >= -0.05 - 1e-6) and np.all(
        out.actions[..., :6] <= 0.05 + 1e-6
    )
    nearest = np.abs(out.model_actions[..., None] - adapter.tokens.centres).min(-1)
    assert nearest.max() < 1e-6  # every model action is a bin centre
    # SFT targets: robot-unit actions -> the tokens that decode back to (nearly) them
    tokens = adapter.tokens_for(out.actions[:, 0])
    assert torch.equal(tokens, out.extras["tokens"])


def test_pi0_follows_the_committed_prefix_when_rtc_guides() -> None:
    torch.manual_seed(0)
    adapter = build_adapter("pi0", cfg=pi_cfg(False)(0))
    obs = observation("base_0_rgb", 1)
    prefix = np.full((4, 7), 0.3)
    gen = lambda: torch.Generator().manual_seed(5)  # noqa: E731  (the same noise for both)
    free = adapter.act(obs, generator=gen()).actions[0]
    guided = adapter.act(
        obs, rtc_prefix=prefix, rtc_inference_delay=3, rtc_execute_horizon=2, generator=gen()
    ).actions[0]
    err_free, err_guided = np.abs(free[:3] - 0.3).mean(), np.abs(guided[:3] - 0.3).mean()
    assert err_guided < 0.5 * err_free, (err_free, err_guided)
    served = serve(adapter)  # the policy client's request keys reach the sampler
    assert served.infer({**obs, "rtc_prefix": prefix, "rtc_inference_delay": 3})[
        "actions"
    ].shape == (1, 10, 7)


@pytest.mark.parametrize("case", ["openvla_oft", "pi05"])
def test_adapters_run_in_bfloat16(case: str) -> None:
    """The GPU configs load in bf16: every tensor an adapter makes must follow the weights'
    dtype."""
    name, make_cfg, cam, _ = CASES[case]
    torch.manual_seed(0)
    adapter = build_adapter(name, cfg=make_cfg(4)).to(torch.bfloat16)
    obs = observation(cam)
    out = adapter.act(obs, deterministic=False)
    assert out.actions.dtype == np.float32 and np.all(np.isfinite(out.actions))
    logp = adapter.log_prob(obs, out.extras)
    assert logp.dtype == torch.float32 and torch.isfinite(logp).all()
