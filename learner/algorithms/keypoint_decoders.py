"""Decoders of the deep spatial autoencoder: keypoints ``[N, 2K]`` -> frame ``[N, 3, h, w]``.

``train.decoder`` of ``rlinf train configs/encoder_pretrain.yaml`` picks an entry of
:data:`DECODERS`; each builds ``(feature_dim, target_hw) -> nn.Module``. The keypoints are the
backbone's spatial softmax: ``K`` expected ``x`` then ``K`` expected ``y``, in ``[-1, 1]``.

* ``linear`` (Finn et al. 2016): one linear map from the coordinates to the pixels. A linear
  map cannot move a blob across the image as its coordinate moves, so it draws the average scene
  and rewards the points little for tracking a small object; on the push scene its points placed
  the cube and the goal hardly better than random weights (``benchmarks/encoder_probe.py``).
* ``heatmap`` (Jakab et al. 2018, "Unsupervised learning of object landmarks through conditional
  image generation"): each point is drawn as a Gaussian blob at its coordinates, and a small
  convolutional network paints the frame from those blobs plus a learnt background. The network
  is translation-equivariant, so the only way to paint the cube where it is, is a point that is
  where the cube is: the reconstruction error is a localisation error.

>>> dec = DECODERS.get("heatmap")(8, (16, 16))
>>> dec(torch.zeros(2, 8)).shape
torch.Size([2, 3, 16, 16])
>>> DECODERS.get("linear")(8, (16, 16))(torch.zeros(2, 8)).shape
torch.Size([2, 3, 16, 16])
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from rlinf_contracts.registry import Registry

DECODERS: Registry[Callable[[int, tuple[int, int]], nn.Module]] = Registry("train.decoder")
DEFAULT_DECODER = "heatmap"


class LinearDecoder(nn.Module):
    """The coordinates -> the pixels, one linear layer."""

    def __init__(self, feature_dim: int, target_hw: tuple[int, int]) -> None:
        super().__init__()
        self.hw = target_hw
        self.linear = nn.Linear(feature_dim, 3 * target_hw[0] * target_hw[1])

    def forward(self, points: Tensor) -> Tensor:
        return self.linear(points).view(-1, 3, *self.hw)


class HeatmapDecoder(nn.Module):
    """Gaussian blobs at the points -> three 3x3 convs -> RGB, plus a learnt background frame.

    ``sigma`` is in the points' ``[-1, 1]`` units (0.1: about 1.6 px of a 32 px target), wide
    enough that a blob overlaps an object a few pixels away early in training, so the gradient
    can pull the point onto it. Three 3x3 convs give the painter a 7 px reach on the target,
    about the size of the cube and the goal disc at 32 px.
    """

    def __init__(
        self, feature_dim: int, target_hw: tuple[int, int], width: int = 32, sigma: float = 0.1
    ) -> None:
        super().__init__()
        if feature_dim % 2:
            raise ValueError(f"heatmap decoder needs (x, y) pairs, got {feature_dim} features")
        self.k, self.hw, self.sigma = feature_dim // 2, target_hw, sigma
        self.register_buffer("ys", torch.linspace(-1.0, 1.0, target_hw[0]), persistent=False)
        self.register_buffer("xs", torch.linspace(-1.0, 1.0, target_hw[1]), persistent=False)
        self.paint = nn.Sequential(
            nn.Conv2d(self.k, width, 3, padding=1),
            nn.ReLU(True),
            nn.Conv2d(width, width, 3, padding=1),
            nn.ReLU(True),
            nn.Conv2d(width, 3, 3, padding=1),
        )
        self.background = nn.Parameter(torch.zeros(1, 3, *target_hw))

    def heatmaps(self, points: Tensor) -> Tensor:
        """``[N, 2K]`` -> ``[N, K, h, w]`` unit-height Gaussians (separable: one outer product)."""
        x, y = points[:, : self.k, None], points[:, self.k :, None]
        gx = torch.exp(-(self.xs - x).square() / (2 * self.sigma**2))  # [N, K, w]
        gy = torch.exp(-(self.ys - y).square() / (2 * self.sigma**2))  # [N, K, h]
        return gy[..., :, None] * gx[..., None, :]

    def forward(self, points: Tensor) -> Tensor:
        return self.background + self.paint(self.heatmaps(points))


DECODERS.register("linear")(LinearDecoder)
DECODERS.register("heatmap")(HeatmapDecoder)

__all__ = ["DECODERS", "DEFAULT_DECODER", "HeatmapDecoder", "LinearDecoder"]
