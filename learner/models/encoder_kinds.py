"""Pixel encoder kinds of the off-policy actor: a registry, the frozen pretrained encoder, weights.

``model.encoder.kind`` picks an entry of :data:`ENCODER_KINDS`; every entry builds
``(num_cameras, hw, channels, out_dim, **options) -> nn.Module`` mapping a list of
``uint8 [B, H, W, 3]`` camera images to ``[B, out_dim]``:

* ``cnn`` (registered by :mod:`learner.models.offpolicy`): the trainable DrQ encoder, trained by
  the critic loss on randomly shifted pixels in every batch.
* ``frozen``: :class:`FrozenEncoder` -- a pretrained :class:`KeypointBackbone` that never trains,
  then a small trainable head (linear, LayerNorm, tanh; the critic trains it like the DrQ head).

Why frozen features are cached: the backbone is the expensive part of a pixel update and its
output for a frame never changes, so the off-policy learner computes it once, when the frame
enters the replay (:mod:`learner.offpolicy.feature_replay`), and an update then costs about a
state update (the head is one small linear layer). A cached observation is one flat vector
``[state | backbone features]``; :func:`encode_cached` is how the policy's encoder reads it.

Why a keypoint backbone (convs, then a spatial softmax giving each channel's expected image
``(x, y)``): push from pixels must locate a small cube and the goal marker, and a spatial softmax
keeps *where* a feature fires in a handful of numbers (Levine et al. 2016; Finn et al. 2016
pretrained the same bottleneck as a deep spatial autoencoder for pushing), so the cached vector is
small (``2 x channels[-1]`` per camera) and the replay stays cheap.

Weights (``model.encoder.weights``): a checkpoint directory of ``rlinf train
configs/encoder_pretrain.yaml`` (or its run directory: the latest checkpoint), a ``.safetensors``
file or a torch state dict (``.pt`` / ``.pth``) whose keys are the backbone's; a mismatch raises
:class:`EncoderWeightsError` naming the missing, unexpected and mis-shaped keys.

>>> enc = ENCODER_KINDS.get("frozen")(2, (32, 32), (8, 8), 16)
>>> imgs = [torch.zeros(3, 32, 32, 3, dtype=torch.uint8)] * 2
>>> enc(imgs).shape, enc.feature_dim, sum(p.requires_grad for p in enc.backbone.parameters())
(torch.Size([3, 16]), 32, 0)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from learner.models import dinov2 as _dinov2  # noqa: F401  (registers its backbones)
from learner.models import resnet10 as _resnet10  # noqa: F401  (registers its backbone)
from learner.models.backbones import (
    BACKBONE_WEIGHTS,
    BACKBONES,
    DEFAULT_BACKBONE,
    EncoderWeightsError,
    read_state,
    weights_file,
)
from rlinf_contracts.registry import Registry

log = logging.getLogger(__name__)

ENCODER_KINDS: Registry[Callable[..., nn.Module]] = Registry("model.encoder.kind")


def to_unit(images: Tensor) -> Tensor:
    """``uint8 [N, H, W, 3]`` -> ``float [N, 3, H, W]`` in ``[-0.5, 0.5]`` (the encoders' input)."""
    return images.permute(0, 3, 1, 2).float() / 255.0 - 0.5


class SpatialSoftmax(nn.Module):
    """``[N, C, H, W]`` -> ``[N, 2C]``: each channel's expected ``(x, y)`` under its softmax."""

    def forward(self, x: Tensor) -> Tensor:
        n, c, h, w = x.shape
        p = torch.softmax(x.flatten(2), dim=-1).view(n, c, h, w)
        ys = torch.linspace(-1.0, 1.0, h, device=x.device, dtype=p.dtype)
        xs = torch.linspace(-1.0, 1.0, w, device=x.device, dtype=p.dtype)
        ex = (p.sum(2) * xs).sum(-1)
        ey = (p.sum(3) * ys).sum(-1)
        return torch.cat([ex, ey], dim=-1)


class KeypointBackbone(nn.Module):
    """One camera ``float [N, 3, H, W]`` -> ``[N, 2 * channels[-1]]`` keypoints, plus with
    ``grid = g > 0`` each channel's softmax mass pooled over a ``g x g`` grid (``g * g *
    channels[-1]`` more numbers).

    The first conv has stride 2, the others stride 1 (the spatial softmax needs a map fine
    enough to place a 4 cm cube); the same weights serve every camera and any image size.

    Why the grid: a keypoint is the *mean* of its channel's softmax, so a channel that fires on
    two things (the cube and the goal disc are both "foreground" to the autoencoder) reports a
    point between them, where neither is. The pooled mass keeps both modes -- which cells the
    channel fires in -- and the trainable head reads whichever the task needs (a soft spatial
    histogram, in the spirit of the learned spatial embeddings real-robot RL puts on a frozen
    feature map). The weights are the same; only the readout changes.
    """

    def __init__(self, channels: Sequence[int] = (16, 16, 32), grid: int = 0) -> None:
        super().__init__()
        if not channels:
            raise ValueError("KeypointBackbone needs at least one conv layer")
        layers: list[nn.Module] = []
        c_in = 3
        for i, c in enumerate(channels):
            layers.append(nn.Conv2d(c_in, c, kernel_size=3, stride=2 if i == 0 else 1, padding=1))
            if i < len(channels) - 1:
                layers.append(nn.ReLU(True))
            c_in = c
        self.convs = nn.Sequential(*layers)
        self.keypoints = SpatialSoftmax()
        self.grid = int(grid)
        self.out_dim = (2 + self.grid * self.grid) * int(channels[-1])

    def forward(self, x: Tensor) -> Tensor:
        maps = self.convs(x)
        points = self.keypoints(maps)
        if self.grid <= 0:
            return points
        mass = torch.softmax(maps.flatten(2), dim=-1).view_as(maps)
        cells = nn.functional.adaptive_avg_pool2d(mass, self.grid) * (
            mass[0, 0].numel() / self.grid**2
        )
        return torch.cat([points, cells.flatten(1)], dim=-1)


@BACKBONES.register("keypoints")
def keypoint_backbone(
    channels: Sequence[int] = (16, 16, 32), grid: int = 0, hw: tuple[int, int] = (64, 64)
) -> KeypointBackbone:
    """The project's keypoint CNN (``rlinf train configs/encoder_pretrain.yaml``)."""
    return KeypointBackbone(tuple(channels), grid)


def shifted(images: Tensor, pad: int, generator: torch.Generator | None) -> Tensor:
    """``uint8 [N, H, W, 3]`` shifted by up to ``pad`` px per sample (edge pad + random crop)."""
    if pad <= 0:
        return images
    n, h, w, _ = images.shape
    x = nn.functional.pad(images.permute(0, 3, 1, 2).float(), (pad,) * 4, mode="replicate")
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=generator).tolist()
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=generator).tolist()
    out = torch.stack([x[i, :, y : y + h, z : z + w] for i, (y, z) in enumerate(zip(dy, dx))])
    return out.permute(0, 2, 3, 1).to(torch.uint8)


FROZEN_HEADS: Registry[Callable[[int, int], tuple[nn.Module, int]]] = Registry("model.encoder.head")


@FROZEN_HEADS.register("linear")
def linear_head(feature_dim: int, out_dim: int) -> tuple[nn.Module, int]:
    """DrQ's projection (linear, LayerNorm, tanh) to ``out_dim``, trained by the critic."""
    head = nn.Sequential(nn.Linear(feature_dim, out_dim), nn.LayerNorm(out_dim), nn.Tanh())
    return head, out_dim


@FROZEN_HEADS.register("raw")
def raw_head(feature_dim: int, out_dim: int) -> tuple[nn.Module, int]:
    """The keypoint coordinates themselves, as the policy's MLPs read a state vector.

    Why: keypoints are already a few meaningful numbers in ``[-1, 1]`` (where the cube, the goal
    and the fingers are), like the task features of a state observation; a projection that
    mixes and renormalises them, trained from scratch by the critic, is one more thing the
    critic must learn before the policy sees where anything is."""
    return nn.Identity(), feature_dim


@ENCODER_KINDS.register("frozen")
class FrozenEncoder(nn.Module):
    """Pretrained backbone (never trained) per camera, then a trainable linear-LayerNorm-tanh head.

    ``backbone`` names the pretrained network (:data:`~learner.models.backbones.BACKBONES`);
    ``channels`` and ``grid`` size the keypoint one (they must match the weights loaded into it).
    """

    caches_features = True  # the off-policy learner stores backbone features, not pixels

    def __init__(
        self,
        num_cameras: int,
        hw: tuple[int, int],
        channels: tuple[int, ...] = (16, 16, 32),
        out_dim: int = 50,
        grid: int = 0,
        head: str = "linear",
        backbone: str = DEFAULT_BACKBONE,
    ) -> None:
        super().__init__()
        build = BACKBONES.get(backbone)
        self.backbone = build(channels=channels, grid=grid, hw=tuple(hw)).requires_grad_(False)
        self.num_cameras, self.hw = num_cameras, tuple(hw)
        self.feature_dim = num_cameras * self.backbone.out_dim
        self.head, self.out_dim = FROZEN_HEADS.get(head)(self.feature_dim, out_dim)
        self.backbone_calls = 0  # backbone forward passes (tests count them)

    def train(self, mode: bool = True) -> FrozenEncoder:
        super().train(mode)
        self.backbone.eval()  # frozen: no train-mode behaviour ever
        return self

    @torch.no_grad()
    def features(self, images: Sequence[Tensor]) -> Tensor:
        """Backbone features ``[B, feature_dim]`` of one image per camera (one batched pass)."""
        b = images[0].shape[0]
        self.backbone_calls += 1
        out = self.backbone(to_unit(torch.cat(list(images), dim=0)))
        return torch.cat(out.split(b, dim=0), dim=-1)

    @torch.no_grad()
    def cached_views(
        self, images: Sequence[Tensor], views: int, pad: int, generator: torch.Generator | None
    ) -> Tensor:
        """``[B, views * feature_dim]``: view 0 unshifted, the others shifted by up to ``pad`` px
        (DrQ's augmentation, computed once per frame), all views in one backbone pass."""
        stacked = [
            torch.cat([img] + [shifted(img, pad, generator) for _ in range(views - 1)])
            for img in images
        ]
        b = images[0].shape[0]
        return torch.cat(self.features(stacked).split(b, dim=0), dim=-1)

    def from_features(self, features: Tensor) -> Tensor:
        return self.head(features)

    def forward(self, images: list[Tensor]) -> Tensor:
        return self.head(self.features(images))


def encode_cached(pixels: nn.Module, flat: Tensor, state_dim: int) -> Tensor:
    """``[state | cached backbone features]`` -> ``[state | head(features)]`` (what the policy's
    encoder does with a replay batch of a feature-caching kind)."""
    if not getattr(pixels, "caches_features", False):
        raise TypeError(
            f"{type(pixels).__name__} reads images, not cached features: give it "
            "{'state', 'images'} observations (only model.encoder.kind: frozen caches features)"
        )
    return torch.cat([flat[:, :state_dim], pixels.from_features(flat[:, state_dim:])], dim=-1)


def build_pixel_encoder(
    kind: str,
    num_cameras: int,
    hw: tuple[int, int],
    channels: tuple[int, ...],
    out_dim: int,
    **options: Any,
) -> nn.Module:
    """The encoder registered as ``kind`` (unknown kinds fail with the known ones)."""
    return ENCODER_KINDS.get(kind)(num_cameras, hw, tuple(channels), out_dim, **options)


# ---------------------------------------------------------------------------- weights
def _strip_prefix(state: dict[str, Tensor], want: set[str]) -> dict[str, Tensor]:
    """Keys as the module names them when the file nests them (``backbone.``, ``encoder.``)."""
    if set(state) & want:
        return state
    for prefix in ("backbone.", "encoder.backbone.", "encoder."):
        cut = {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}
        if set(cut) & want:
            return cut
    return state


def load_weights(module: nn.Module, path: str | Path, what: str = "frozen encoder") -> None:
    """Load ``path`` into ``module`` strictly; mismatches raise :class:`EncoderWeightsError`."""
    own = module.state_dict()
    reader = getattr(module, "read_weights", read_state)  # a released layout -> these keys
    state = _strip_prefix(reader(path), set(own))
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
        for k in sorted(set(own) & set(state))
        if tuple(state[k].shape) != tuple(own[k].shape)
    ]
    if missing or unexpected or shapes:
        raise EncoderWeightsError(
            f"key 'model.encoder.weights': {path} does not match the {what}: missing keys "
            f"{missing}, unexpected keys {unexpected}, shape mismatches {shapes}; set "
            "model.encoder.channels to the architecture the weights were trained with"
        )
    module.load_state_dict({k: state[k].to(own[k].dtype) for k in own})


def load_pretrained(pixels: nn.Module | None, weights: str | None) -> None:
    """Load ``weights`` into a frozen encoder's backbone (no-op for kinds without one)."""
    backbone = getattr(pixels, "backbone", None)
    if backbone is None or not weights:
        return
    load_weights(backbone, weights)
    log.info("frozen encoder: backbone weights from %s", weights)


def feature_rng(seed: int) -> torch.Generator:
    """The generator of the cached shifts (seeded: a rerun caches the same views)."""
    return torch.Generator().manual_seed(int(np.uint32(seed)))


__all__ = [
    "BACKBONES",
    "BACKBONE_WEIGHTS",
    "ENCODER_KINDS",
    "EncoderWeightsError",
    "FROZEN_HEADS",
    "FrozenEncoder",
    "KeypointBackbone",
    "SpatialSoftmax",
    "build_pixel_encoder",
    "encode_cached",
    "feature_rng",
    "load_pretrained",
    "load_weights",
    "read_state",
    "shifted",
    "to_unit",
    "weights_file",
]
