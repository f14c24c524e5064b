"""Observation encoders: running state normaliser, MLP for state, small CNN for images."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RunningNorm(nn.Module):
    """Running mean / variance of the state vector, kept as buffers.

    Why buffers: they travel with ``state_dict`` -> checkpoints, published weights and the
    policy server, so every consumer normalises exactly as the trainer did. The actor calls
    :meth:`update` once per iteration *after* its PPO epochs, so the stats never change
    between the rollout that produced ``old_logp`` and the update that reuses it.
    """

    def __init__(self, dim: int, clip: float = 10.0) -> None:
        super().__init__()
        self.clip = clip
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(1e-4))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        x = x.reshape(-1, self.mean.shape[0]).float()
        if x.shape[0] == 0:
            return
        self.update_from_moments(x.mean(0), x.var(0, unbiased=False), float(x.shape[0]))

    @torch.no_grad()
    def update_from_moments(self, b_mean: Tensor, b_var: Tensor, n: float) -> None:
        """Parallel-variance merge of a batch's mean / (biased) variance over ``n`` samples."""
        total = self.count + n
        delta = b_mean - self.mean
        self.mean += delta * n / total
        self.var.copy_(
            (self.var * self.count + b_var * n + delta.square() * self.count * n / total) / total
        )
        self.count.copy_(total)

    def forward(self, x: Tensor) -> Tensor:
        return ((x - self.mean) / (self.var + 1e-8).sqrt()).clamp(-self.clip, self.clip)


def mlp(in_dim: int, hidden: list[int], activation: type[nn.Module] = nn.Tanh) -> nn.Sequential:
    """``Linear -> act`` per hidden size, orthogonal init (the standard PPO recipe)."""
    layers: list[nn.Module] = []
    for h in hidden:
        lin = nn.Linear(in_dim, h)
        nn.init.orthogonal_(lin.weight, gain=2**0.5)
        nn.init.zeros_(lin.bias)
        layers += [lin, activation()]
        in_dim = h
    return nn.Sequential(*layers)


class ConvEncoder(nn.Module):
    """Small CNN for ``uint8 [B, H, W, 3]`` images -> ``[B, out_dim]`` (one per camera,
    concatenated).

    Three stride-2 convs and a global average pool: cheap enough to train on a CPU at 64x64,
    and independent of the image size, so one checkpoint serves any resolution.
    """

    def __init__(
        self, num_cameras: int, channels: tuple[int, ...] = (16, 32, 32), out_dim: int = 64
    ) -> None:
        super().__init__()
        convs: list[nn.Module] = []
        c_in = 3
        for c in channels:
            convs += [nn.Conv2d(c_in, c, kernel_size=3, stride=2, padding=1), nn.ReLU()]
            c_in = c
        self.convs = nn.Sequential(*convs)
        self.proj = nn.Sequential(nn.Linear(c_in * num_cameras, out_dim), nn.ReLU())
        self.out_dim = out_dim

    def forward(self, images: list[Tensor]) -> Tensor:
        feats = []
        for img in images:
            x = img.permute(0, 3, 1, 2).float() / 255.0 - 0.5
            feats.append(self.convs(x).mean(dim=(2, 3)))
        return self.proj(torch.cat(feats, dim=-1))
