"""Action heads: features ``[B, F]`` -> a chunk distribution over ``[B, chunk, A]``.

Heads are registered by name in :data:`HEADS` so a config picks one with
``model.head: gaussian | tanh_gaussian | binned``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from learner.algorithms.distributions import ActionBins
from learner.models.distributions import ChunkBinned, ChunkGaussian, ChunkTanhGaussian
from rlinf_contracts.registry import Registry

HEADS: Registry[type[nn.Module]] = Registry("action head")


def _small_init(layer: nn.Linear, gain: float = 0.01) -> nn.Linear:
    """Near-zero final layer: the initial policy is centred, so early PPO steps are stable."""
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


@HEADS.register("gaussian")
class GaussianHead(nn.Module):
    """Mean from a linear layer, state-independent learned log-std (the PPO default)."""

    def __init__(
        self,
        feat_dim: int,
        action_dim: int,
        chunk: int = 1,
        init_log_std: float = -0.5,
        **_: object,
    ) -> None:
        super().__init__()
        self.chunk, self.action_dim = chunk, action_dim
        self.mean = _small_init(nn.Linear(feat_dim, chunk * action_dim))
        self.log_std = nn.Parameter(torch.full((chunk, action_dim), float(init_log_std)))

    def forward(self, feat: Tensor) -> ChunkGaussian:
        mean = self.mean(feat).view(-1, self.chunk, self.action_dim)
        return ChunkGaussian(mean, self.log_std.clamp(-5.0, 1.0))


@HEADS.register("tanh_gaussian")
class TanhGaussianHead(GaussianHead):
    """Same parameters as :class:`GaussianHead`, actions squashed by tanh (bounded, SAC-style)."""

    def forward(self, feat: Tensor) -> ChunkTanhGaussian:  # type: ignore[override]  # a narrower distribution
        mean = self.mean(feat).view(-1, self.chunk, self.action_dim)
        return ChunkTanhGaussian(mean, self.log_std)


@HEADS.register("binned")
class BinnedHead(nn.Module):
    """Per-dimension categorical over ``n_bins`` uniform bins of [-1, 1] (RT/OpenVLA-style)."""

    def __init__(
        self, feat_dim: int, action_dim: int, chunk: int = 1, n_bins: int = 21, **_: object
    ) -> None:
        super().__init__()
        self.chunk, self.action_dim, self.n_bins = chunk, action_dim, n_bins
        self.bins = ActionBins(n_bins)
        self.logits = _small_init(nn.Linear(feat_dim, chunk * action_dim * n_bins))

    def forward(self, feat: Tensor) -> ChunkBinned:
        logits = self.logits(feat).view(-1, self.chunk, self.action_dim, self.n_bins)
        return ChunkBinned(logits, self.bins)
