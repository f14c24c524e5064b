"""ResNet-10 with GroupNorm: SERL / HIL-SERL's frozen image encoder, loadable from its release.

Why this network: the real-robot RL runs our users compare against (SERL, HIL-SERL) read their
cameras through a ResNet-10 pretrained on ImageNet-1k and kept frozen; a user who has that file
(``resnet10_params.pkl``, a pickle of flax parameters) should get the same features here, not a
look-alike. So the module mirrors the flax definition exactly:

* stem: ``conv_init`` 7x7 stride 2 (padding 3, no bias), ``norm_init`` (GroupNorm, 4 groups,
  eps 1e-5), ReLU, 3x3 max pool stride 2 with ``SAME`` padding;
* four stages of one basic block each (``ResNetBlock_0..3``, 64 / 128 / 256 / 512 filters, stride
  2 from the second on): ``Conv_0`` 3x3, ``MyGroupNorm_0``, ReLU, ``Conv_1`` 3x3,
  ``MyGroupNorm_1``, plus ``conv_proj`` 1x1 / ``norm_proj`` on the shortcut where the shape
  changes; ReLU after the sum;
* inputs normalised with ImageNet's mean and std.

``SAME`` padding is flax's (XLA's): a stride-2 window over an even side pads one pixel *after*
the image and none before; torch's symmetric ``padding=1`` would shift every feature by a pixel,
so the padding is applied explicitly. Parameter names are the flax paths joined by ``.``
(``ResNetBlock_1.conv_proj.weight``); :meth:`ResNet10.read_weights` turns the pickle's
``kernel`` (HWIO) / ``scale`` into torch's ``weight`` (OIHW).

Features: the final map (512 channels; 2 x 2 at 64 px) averaged over space -- SERL's ``avg``
pooling -- so a camera gives 512 numbers to cache.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from learner.models.backbones import (
    BACKBONES,
    EncoderWeightsError,
    imagenet_normalised,
    read_state,
    weights_file,
)

FILTERS = (64, 128, 256, 512)
GROUPS = 4


def same_pad(x: Tensor, kernel: int, stride: int, value: float = 0.0) -> Tensor:
    """Pad ``[N, C, H, W]`` as XLA's ``SAME`` does: output side ``ceil(side / stride)``, the odd
    pixel of the padding after the image."""
    pads: list[int] = []
    for side in (x.shape[3], x.shape[2]):  # F.pad takes the last dimension first
        total = max((math.ceil(side / stride) - 1) * stride + kernel - side, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads, value=value)


class _SameConv(nn.Conv2d):
    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1) -> None:
        super().__init__(c_in, c_out, kernel, stride, padding=0, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(same_pad(x, self.kernel_size[0], self.stride[0]))


def _norm(c: int) -> nn.GroupNorm:
    return nn.GroupNorm(GROUPS, c, eps=1e-5)


class _Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.Conv_0, self.MyGroupNorm_0 = _SameConv(c_in, c_out, 3, stride), _norm(c_out)
        self.Conv_1, self.MyGroupNorm_1 = _SameConv(c_out, c_out, 3), _norm(c_out)
        self.projects = c_in != c_out or stride != 1
        if self.projects:
            self.conv_proj, self.norm_proj = _SameConv(c_in, c_out, 1, stride), _norm(c_out)

    def forward(self, x: Tensor) -> Tensor:
        y = self.MyGroupNorm_1(self.Conv_1(F.relu(self.MyGroupNorm_0(self.Conv_0(x)))))
        if self.projects:
            x = self.norm_proj(self.conv_proj(x))
        return F.relu(x + y)


@BACKBONES.register("resnet10")
class ResNet10(nn.Module):
    """One camera ``[N, 3, H, W]`` in ``[-0.5, 0.5]`` -> ``[N, 512]`` (the last map's mean)."""

    out_dim = FILTERS[-1]

    def __init__(
        self, channels: Sequence[int] = (), grid: int = 0, hw: tuple[int, int] = (64, 64)
    ) -> None:
        super().__init__()  # channels / grid size the keypoint backbone; any image size works
        self.conv_init = nn.Conv2d(3, FILTERS[0], 7, 2, padding=3, bias=False)
        self.norm_init = _norm(FILTERS[0])
        c_in = FILTERS[0]
        for i, c in enumerate(FILTERS):
            setattr(self, f"ResNetBlock_{i}", _Block(c_in, c, 2 if i > 0 else 1))
            c_in = c

    def feature_map(self, x: Tensor) -> Tensor:
        x = F.relu(self.norm_init(self.conv_init(imagenet_normalised(x))))
        x = F.max_pool2d(same_pad(x, 3, 2, value=float("-inf")), 3, 2)
        for i in range(len(FILTERS)):
            x = getattr(self, f"ResNetBlock_{i}")(x)
        return x

    def forward(self, x: Tensor) -> Tensor:
        return self.feature_map(x).mean(dim=(2, 3))

    @staticmethod
    def read_weights(path: str | Path) -> dict[str, Tensor]:
        """The released flax pickle (``.pkl``) converted to this module's keys, or a state dict
        already in them (``.safetensors`` / ``.pt``)."""
        file = weights_file(path)  # a missing path: the one-line error naming the key
        if file.suffix != ".pkl":
            return read_state(file)
        with open(file, "rb") as f:
            try:
                params = _ParamsUnpickler(f).load()
            except pickle.UnpicklingError as e:
                raise EncoderWeightsError(
                    f"key 'model.encoder.weights': {path} is not a ResNet-10 parameter pickle: {e}"
                ) from None
        return flax_to_torch(params)


def flax_to_torch(params: Mapping[str, Any]) -> dict[str, Tensor]:
    """Nested flax parameters (``{"conv_init": {"kernel": HWIO}, ...}``, optionally under
    ``"params"``) -> flat torch keys: ``kernel`` -> ``weight`` (OIHW), ``scale`` -> ``weight``."""
    if set(params) == {"params"}:
        params = params["params"]
    out: dict[str, Tensor] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for name, value in node.items():
            if isinstance(value, Mapping):
                walk(value, f"{prefix}{name}.")
                continue
            array = torch.from_numpy(np.array(value, dtype=np.float32))
            if name == "kernel":
                name, array = "weight", array.permute(3, 2, 0, 1).contiguous()
            elif name == "scale":
                name = "weight"
            out[f"{prefix}{name}"] = array

    walk(params, "")
    return out


class _ParamsUnpickler(pickle.Unpickler):
    """Unpickles nested dicts of numpy arrays and nothing else: a pickle can run any callable it
    names, and a weights file from elsewhere should not. Flax's ``FrozenDict`` reads as a dict."""

    ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("builtins", "dict"),
        ("collections", "OrderedDict"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if name == "FrozenDict" and module.startswith("flax"):
            return dict
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"it asks for {module}.{name}; only nested dicts of numpy arrays are read (save the "
            "parameters with jax.device_get first, or convert them to .safetensors)"
        )


__all__ = ["FILTERS", "ResNet10", "flax_to_torch", "same_pad"]
