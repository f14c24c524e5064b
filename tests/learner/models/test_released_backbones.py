"""Released image backbones under the frozen encoder: SERL's ResNet-10 from its flax pickle,
DINOv2 from a Hugging Face export or the torch hub layout (tiny random weights in the released
layouts: no weights are downloaded)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from learner.models.adapters.vit import VitConfig
from learner.models.backbones import IMAGENET_MEAN, IMAGENET_STD, imagenet_normalised
from learner.models.dinov2 import DinoV2, resample_positions
from learner.models.encoder_kinds import (
    EncoderWeightsError,
    FrozenEncoder,
    load_pretrained,
    load_weights,
    to_unit,
)
from learner.models.resnet10 import FILTERS
from rlinf_contracts.config import ConfigError, from_dict, load_config

ROOT = Path(__file__).resolve().parents[3]


# ------------------------------------------------------------------------------ ResNet-10
def flax_params(seed: int = 0) -> dict:
    """Random parameters in the layout of SERL's ``resnet10_params.pkl`` (flax names, HWIO)."""
    rng = np.random.default_rng(seed)

    def conv(kh: int, ci: int, co: int) -> dict:
        return {"kernel": rng.normal(0, (2 / (kh * kh * ci)) ** 0.5, (kh, kh, ci, co)).astype("f4")}

    def norm(c: int) -> dict:
        return {
            "scale": (1 + 0.1 * rng.normal(size=c)).astype("f4"),
            "bias": (0.1 * rng.normal(size=c)).astype("f4"),
        }

    params: dict = {"conv_init": conv(7, 3, 64), "norm_init": norm(64)}
    c_in = 64
    for i, c in enumerate(FILTERS):
        block = {
            "Conv_0": conv(3, c_in, c),
            "MyGroupNorm_0": norm(c),
            "Conv_1": conv(3, c, c),
            "MyGroupNorm_1": norm(c),
        }
        if c != c_in or i > 0:
            block |= {"conv_proj": conv(1, c_in, c), "norm_proj": norm(c)}
        params[f"ResNetBlock_{i}"] = block
        c_in = c
    return params


def _same(side: int, k: int, s: int) -> tuple[int, int]:
    total = max((-(-side // s) - 1) * s + k - side, 0)
    return total // 2, total - total // 2


def _conv(x: np.ndarray, k: np.ndarray, stride: int, pads: tuple | None = None) -> np.ndarray:
    """NHWC x HWIO convolution, ``SAME`` unless ``pads`` is given (flax's conventions)."""
    kh, kw = k.shape[:2]
    pads = pads or (_same(x.shape[1], kh, stride), _same(x.shape[2], kw, stride))
    xp = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
    h = (xp.shape[1] - kh) // stride + 1
    w = (xp.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], h, w, k.shape[3]))
    for i in range(kh):
        for j in range(kw):
            out += xp[:, i : i + stride * h : stride, j : j + stride * w : stride] @ k[i, j]
    return out


def _group_norm(x: np.ndarray, p: dict, groups: int = 4) -> np.ndarray:
    n, h, w, c = x.shape
    g = x.reshape(n, h, w, groups, c // groups)
    g = (g - g.mean((1, 2, 4), keepdims=True)) / np.sqrt(g.var((1, 2, 4), keepdims=True) + 1e-5)
    return g.reshape(n, h, w, c) * p["scale"] + p["bias"]


def _max_pool(x: np.ndarray) -> np.ndarray:
    pads = (_same(x.shape[1], 3, 2), _same(x.shape[2], 3, 2))
    xp = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)), constant_values=-np.inf)
    h, w = (xp.shape[1] - 3) // 2 + 1, (xp.shape[2] - 3) // 2 + 1
    return np.max(
        [xp[:, i : i + 2 * h : 2, j : j + 2 * w : 2] for i in range(3) for j in range(3)], axis=0
    )


def reference_features(params: dict, images: np.ndarray) -> np.ndarray:
    """SERL's ResNet-10 (pre-pooling map, then the spatial mean) written out in numpy, NHWC."""
    relu = lambda a: np.maximum(a, 0.0)  # noqa: E731
    x = (images.astype(np.float64) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
    x = _conv(x, params["conv_init"]["kernel"], 2, ((3, 3), (3, 3)))
    x = _max_pool(relu(_group_norm(x, params["norm_init"])))
    for i in range(len(FILTERS)):
        b = params[f"ResNetBlock_{i}"]
        s = 2 if i > 0 else 1
        y = relu(_group_norm(_conv(x, b["Conv_0"]["kernel"], s), b["MyGroupNorm_0"]))
        y = _group_norm(_conv(y, b["Conv_1"]["kernel"], 1), b["MyGroupNorm_1"])
        if "conv_proj" in b:
            x = _group_norm(_conv(x, b["conv_proj"]["kernel"], s), b["norm_proj"])
        x = relu(x + y)
    return x.mean((1, 2))


def pickled(tmp_path: Path, obj: object, name: str = "resnet10_params.pkl") -> Path:
    path = tmp_path / name
    path.write_bytes(pickle.dumps(obj))
    return path


def test_resnet10_from_the_flax_pickle_matches_the_flax_network(tmp_path: Path) -> None:
    """Odd and even sides on a non-square frame: the SAME padding's odd pixel goes after the
    image, and the HWIO kernels are transposed, exactly as flax computes them."""
    params = flax_params()
    path = pickled(tmp_path, {"params": params})
    enc = FrozenEncoder(1, (40, 56), out_dim=8, backbone="resnet10")
    load_pretrained(enc, str(path))
    images = np.random.default_rng(1).integers(0, 256, (2, 40, 56, 3), dtype=np.uint8)
    ours = enc.features([torch.from_numpy(images)]).numpy()
    want = reference_features(params, images)
    assert ours.shape == (2, 512) and enc.feature_dim == 512
    np.testing.assert_allclose(ours, want, rtol=1e-3, atol=1e-3)
    assert np.abs(want).max() > 0.05  # a real signal, not zeros on both sides


def test_resnet10_pickle_that_names_any_other_callable_is_refused(tmp_path: Path) -> None:
    enc = FrozenEncoder(1, (32, 32), out_dim=8, backbone="resnet10")
    evil = pickled(tmp_path, {"conv_init": os.system})
    with pytest.raises(EncoderWeightsError, match="system"):
        load_pretrained(enc, str(evil))
    with pytest.raises(EncoderWeightsError, match="model.encoder.weights"):
        load_pretrained(enc, str(tmp_path / "resnet10_params.pkl"))  # not there
    params = flax_params()
    del params["ResNetBlock_3"]["conv_proj"]
    with pytest.raises(EncoderWeightsError, match="ResNetBlock_3.conv_proj.weight"):
        load_pretrained(enc, str(pickled(tmp_path, params, "short.pkl")))


def test_resnet10_in_a_run_config_builds_the_learner_on_released_weights(tmp_path: Path) -> None:
    from learner.checkpoint import load_policy, save_checkpoint
    from learner.offpolicy.config import OffPolicyConfig
    from learner.offpolicy.learner import OffPolicyLearner
    from rlinf_contracts.env_registry import make_env

    path = pickled(tmp_path, flax_params())
    raw = load_config(
        ROOT / "configs/sim_franka_push_rlpd_pixels.yaml",
        [
            f"model.encoder.weights={path}",
            "model.encoder.backbone=resnet10",
            "model.encoder.cached_views=1",
            "env.num_envs=2",
            "env.kwargs.image_size=32",
            "train.demos=null",
            "algorithm.name=sac",
        ],
    )
    cfg = from_dict(OffPolicyConfig, raw)
    assert cfg.model.encoder.build_kwargs()["backbone"] == "resnet10"
    env = make_env(cfg.env.name, 2, obs_mode="rgb", cameras=["front", "wrist"], image_size=32)
    core = OffPolicyLearner(cfg, env.spec)
    pixels = core.policy.encoder.pixels
    assert pixels.feature_dim == 2 * 512
    want = torch.from_numpy(flax_params()["conv_init"]["kernel"]).permute(3, 2, 0, 1)
    assert torch.equal(pixels.backbone.conv_init.weight, want)
    # the checkpoint rebuilds the same backbone (what rlinf serve / eval load), no file needed
    ckpt = save_checkpoint(tmp_path / "ckpt", core.policy, iteration=0, weight_version=0)
    served, _ = load_policy(ckpt)
    obs = env.reset(seed=0)
    imgs = [torch.from_numpy(obs["images"][c]) for c in sorted(obs["images"])]
    assert torch.equal(served.encoder.pixels.features(imgs), pixels.features(imgs))
    env.close()
    with pytest.raises(ConfigError, match="did you mean 'resnet10'"):
        from_dict(OffPolicyConfig, {**raw, "model": {**raw["model"], "encoder": {
            **raw["model"]["encoder"], "backbone": "resnet01"}}})  # fmt: skip
    with pytest.raises(ConfigError, match="model.encoder.grid"):
        from_dict(OffPolicyConfig, {**raw, "model": {**raw["model"], "encoder": {
            **raw["model"]["encoder"], "grid": 4}}})  # fmt: skip


# -------------------------------------------------------------------------------- DINOv2
TINY = VitConfig(patch=14, dim=32, depth=2, heads=2, cls_token=True, layer_scale=True)


def hugging_face_model(seed: int = 0):
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(seed)
    cfg = Dinov2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        image_size=28,
        patch_size=14,
        layerscale_value=0.5,
    )
    return Dinov2Model(cfg).eval()


def frames(n: int = 3, side: int = 28) -> torch.Tensor:
    rng = np.random.default_rng(2)
    return torch.from_numpy(rng.integers(0, 256, (n, side, side, 3), dtype=np.uint8))


OLD_NAMES = {
    "attention.q_proj": "attention.attention.query",
    "attention.k_proj": "attention.attention.key",
    "attention.v_proj": "attention.attention.value",
    "attention.o_proj": "attention.output.dense",
}


@pytest.mark.parametrize("names", ["current", "older"])
def test_dinov2_from_a_hugging_face_export_gives_its_features(tmp_path: Path, names: str) -> None:
    hf = hugging_face_model()
    state = {f"dinov2.{k}" if names == "older" else k: v for k, v in hf.state_dict().items()}
    if names == "older":  # the layout of the exports on the hub (before the q/k/v rename)
        for new, old in OLD_NAMES.items():
            state = {k.replace(new, old): v for k, v in state.items()}
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "model.safetensors"))
    ours = DinoV2(TINY, grid=2)
    load_weights(ours, tmp_path, "DINOv2")
    x = to_unit(frames())
    with torch.no_grad():
        tokens = hf(pixel_values=imagenet_normalised(x)).last_hidden_state
        got = ours(x)
    want = torch.cat([tokens[:, 0], tokens[:, 1:].mean(1)], dim=-1)
    assert got.shape == (3, 64)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_dinov2_hub_layout_loads_and_its_position_grid_is_resampled(tmp_path: Path) -> None:
    """facebookresearch's file: ``ls1.gamma``, a ``mask_token``, positions for a larger grid."""
    source = DinoV2(TINY, grid=2)
    for p in source.parameters():
        torch.nn.init.normal_(p, std=0.3)
    hub = {k.removeprefix("vit.").replace("scale_factor", "gamma"): v for k, v in
           source.state_dict().items()}  # fmt: skip
    hub["mask_token"] = torch.zeros(1, 32)
    torch.save(hub, tmp_path / "dinov2_tiny_pretrain.pth")
    same = DinoV2(TINY, grid=2)
    load_weights(same, tmp_path / "dinov2_tiny_pretrain.pth", "DINOv2")
    x = to_unit(frames())
    with torch.no_grad():
        torch.testing.assert_close(same(x), source(x))
    bigger = DinoV2(TINY, grid=3)  # a 42 px frame: 3 x 3 patches from the file's 2 x 2
    load_weights(bigger, tmp_path / "dinov2_tiny_pretrain.pth", "DINOv2")
    pos = bigger.vit.pos_embed.detach()
    assert pos.shape == (1, 10, 32)
    assert torch.equal(pos[:, 0], hub["pos_embed"][:, 0])  # the class token's, kept
    assert torch.equal(resample_positions(hub["pos_embed"], 2), hub["pos_embed"])
    with torch.no_grad():
        assert bigger(to_unit(frames(side=64))).shape == (3, 64)  # any frame size is resized


def test_dinov2_entries_build_at_the_camera_size_and_refuse_a_wrong_file(tmp_path: Path) -> None:
    enc = FrozenEncoder(2, (64, 64), out_dim=8, backbone="dinov2_vits14")
    assert enc.backbone.grid == 5 and enc.feature_dim == 2 * 768
    save_file({"cls_token": torch.zeros(1, 1, 32)}, str(tmp_path / "w.safetensors"))
    with pytest.raises(EncoderWeightsError, match="missing keys"):
        load_pretrained(enc, str(tmp_path / "w.safetensors"))
