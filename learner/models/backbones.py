"""Frozen-encoder backbones: the registry ``model.encoder.backbone`` picks from.

Every entry builds ``(channels=..., grid=..., hw=...) -> nn.Module`` (the keypoint backbone's
conv channels and readout grid, the camera's ``(H, W)``): a module mapping one camera's images,
``float [N, 3, H, W]`` in ``[-0.5, 0.5]`` (:func:`learner.models.encoder_kinds.to_unit`), to
``[N, out_dim]`` features, with an ``out_dim`` attribute. A module may also define
``read_weights(path) -> state dict``: how a released file in its authors' own layout (a flax
pickle, a torch hub checkpoint, a Hugging Face export) becomes this module's keys; without it the
file is read as a plain state dict of the module's keys.

Why a registry of backbones under the one frozen encoder: the caching, the DrQ views and the
trainable head are the same whichever network computes the features; what differs is the
network and the file its weights come in. The entries (registered where they are defined, imported
by :mod:`learner.models.encoder_kinds`):

* ``keypoints`` -- the project's keypoint CNN, pretrained here by ``rlinf train
  configs/encoder_pretrain.yaml`` (``model.encoder.channels`` sizes it);
* ``resnet10`` -- SERL / HIL-SERL's ResNet-10 (:mod:`learner.models.resnet10`);
* ``dinov2_vits14`` / ``dinov2_vitb14`` (and ``..._reg``, with register tokens) -- DINOv2
  ViT-S/14 and ViT-B/14 (:mod:`learner.models.dinov2`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import Registry

BACKBONES: Registry[Callable[..., nn.Module]] = Registry("model.encoder.backbone")
DEFAULT_BACKBONE = "keypoints"
BACKBONE_WEIGHTS = "model.safetensors"

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class EncoderWeightsError(ConfigError):
    """Weights that do not fit the encoder; the message names the keys and what to change.

    A :class:`~rlinf_contracts.config.ConfigError`: the weights are named by the config
    (``model.encoder.weights``), so the CLI reports it as one line naming that key."""


def weights_file(path: str | Path) -> Path:
    """The tensor file meant by ``path``: itself, a checkpoint directory's ``model.safetensors``,
    or the latest checkpoint's under a run / ``checkpoints`` directory."""
    p = Path(path)
    if p.is_file():
        return p
    if (p / BACKBONE_WEIGHTS).is_file():
        return p / BACKBONE_WEIGHTS
    found = sorted(p.glob(f"**/iter_*/{BACKBONE_WEIGHTS}")) if p.is_dir() else []
    if found:
        return found[-1]
    raise EncoderWeightsError(
        f"key 'model.encoder.weights': no weights at {str(path)!r}; expected a .safetensors / .pt "
        "file, a checkpoint directory or the run directory of 'rlinf train "
        "configs/encoder_pretrain.yaml'"
    )


def read_state(path: str | Path) -> dict[str, Tensor]:
    """A state dict from ``path`` (safetensors, or a torch file read with ``weights_only``)."""
    f = weights_file(path)
    if f.suffix == ".safetensors":
        return load_file(str(f))
    state = torch.load(str(f), map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise EncoderWeightsError(f"key 'model.encoder.weights': {f} holds no state dict")
    return state.get("state_dict", state)


def imagenet_normalised(x: Tensor) -> Tensor:
    """``[-0.5, 0.5]`` images (the encoders' input) -> ImageNet mean / std normalised, the input
    the released ImageNet-pretrained backbones were trained on."""
    mean = torch.tensor(IMAGENET_MEAN, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x + 0.5 - mean) / std


__all__ = [
    "BACKBONES",
    "BACKBONE_WEIGHTS",
    "DEFAULT_BACKBONE",
    "EncoderWeightsError",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "imagenet_normalised",
    "read_state",
    "weights_file",
]
