"""Decoders of the deep spatial autoencoder: the heatmap painter makes the keypoints track a small
moving object (what a push needs) better than Finn et al.'s linear decoder, and the pretraining
config names the decoder with a clear error for a typo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from learner.algorithms.keypoint_decoders import DECODERS, HeatmapDecoder
from learner.algorithms.spatial_autoencoder import AutoencoderConfig, SpatialAutoencoderLearner
from learner.models.encoder_kinds import KeypointBackbone, to_unit
from rlinf_contracts.config import ConfigError, from_dict, load_config

ROOT = Path(__file__).resolve().parents[3]


def scene(n: int, gen: torch.Generator) -> tuple[torch.Tensor, np.ndarray]:
    """32 px frames: a grey table, a fixed red bar, a green 5 px square anywhere; its centre."""
    pos = torch.randint(1, 26, (n, 2), generator=gen)
    img = torch.full((n, 32, 32, 3), 40, dtype=torch.uint8)
    img[:, 28:31, 4:28] = torch.tensor([200, 30, 30], dtype=torch.uint8)
    for i, (y, x) in enumerate(pos.tolist()):
        img[i, y : y + 5, x : x + 5] = torch.tensor([40, 220, 40], dtype=torch.uint8)
    return img, pos.numpy() + 2.0


def square_error_px(decoder: str, updates: int = 300) -> float:
    """Held-out error (px) of a linear probe of the square's centre from the trained points."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    backbone = KeypointBackbone((8, 8))
    cfg = AutoencoderConfig(
        lr=3e-3, target_hw=(16, 16), pad=0, decoder=decoder, foreground_weight=10.0
    )
    algo = SpatialAutoencoderLearner(backbone, backbone.out_dim, ["front"], cfg)
    for _ in range(updates):
        algo.update({"front": scene(32, gen)[0]})
    img, centre = scene(256, gen)
    with torch.no_grad():
        points = backbone(to_unit(img)).numpy()
    x = np.c_[points, np.ones(len(points))]
    w, *_ = np.linalg.lstsq(x[:128], centre[:128], rcond=None)
    return float(np.sqrt(np.square(x[128:] @ w - centre[128:]).sum(1).mean()))


def test_heatmap_points_track_a_small_moving_object_better_than_linear_ones() -> None:
    heatmap, linear = square_error_px("heatmap"), square_error_px("linear")
    assert heatmap < 0.75, heatmap  # under a pixel of a 32 px frame
    assert heatmap < 0.8 * linear, (heatmap, linear)


def test_heatmaps_are_gaussians_at_the_points() -> None:
    dec = HeatmapDecoder(2, (9, 9))
    maps = dec.heatmaps(torch.tensor([[0.0, -1.0]]))  # x = 0 (centre column), y = -1 (top row)
    assert maps.shape == (1, 1, 9, 9)
    assert torch.argmax(maps[0, 0]).item() == 4  # row 0, column 4
    assert maps[0, 0, 0, 4].item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="pairs"):
        HeatmapDecoder(3, (8, 8))


def test_decoder_is_a_config_key_with_did_you_mean() -> None:
    from learner.runners.encoder_pretrain import EncoderPretrainConfig

    base = ROOT / "configs/encoder_pretrain.yaml"
    assert set(DECODERS.names()) == {"heatmap", "linear"}
    ok = from_dict(EncoderPretrainConfig, load_config(base, ["train.decoder=linear"]))
    assert ok.train.decoder == "linear"
    with pytest.raises(ConfigError, match="train.decoder.*did you mean 'heatmap'"):
        from_dict(EncoderPretrainConfig, load_config(base, ["train.decoder=heatmp"]))
