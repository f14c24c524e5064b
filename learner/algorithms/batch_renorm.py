"""Batch renormalisation (Ioffe 2017), the normaliser of CrossQ's critics (Bhatt et al. 2024).

Plain BatchNorm normalises with the batch's statistics while training and with the running
averages at evaluation, so the two modes compute different functions. Batch renormalisation
trains with the batch statistics *corrected towards the running ones*:

    x_hat = (x - mu_B) / sigma_B * r + d,
    r = clip(sigma_B / sigma, 1 / r_max, r_max),   d = clip((mu_B - mu) / sigma, -d_max, d_max)

with ``r`` and ``d`` treated as constants (no gradient). While unclipped this equals the
evaluation-mode ``(x - mu) / sigma`` in value, yet the gradient still flows through the batch
statistics. For the first ``warmup_steps`` training passes ``r = 1, d = 0`` (plain BatchNorm)
so that the running statistics settle first; CrossQ's reference uses ``r_max = 3``,
``d_max = 5``, a running-average momentum of 0.01 (0.99 in flax's convention) and 100k warmup
steps. Statistics are over the batch axis ``-2`` of ``x [..., B, W]`` with the biased variance,
per leading index (ensemble member) and unit.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def batch_renorm(
    x: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    r_max: float = 3.0,
    d_max: float = 5.0,
    eps: float = 1e-3,
    renorm: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """Training-mode ``x_hat`` of ``x [..., B, W]``; returns ``(x_hat, batch_mean, batch_var)``.

    ``running_mean`` / ``running_var`` broadcast against ``x`` with a size-1 batch axis.
    ``renorm=False`` is plain BatchNorm (``r = 1, d = 0``). The batch statistics are returned
    (detached) for the caller's running-average update.
    """
    mean = x.mean(dim=-2, keepdim=True)
    var = x.var(dim=-2, unbiased=False, keepdim=True)
    std = (var + eps).sqrt()
    x_hat = (x - mean) / std
    if renorm:
        running_std = (running_var + eps).sqrt()
        r = (std / running_std).clamp(1.0 / r_max, r_max).detach()
        d = ((mean - running_mean) / running_std).clamp(-d_max, d_max).detach()
        x_hat = x_hat * r + d
    return x_hat, mean.detach(), var.detach()


class EnsembleBatchRenorm(nn.Module):
    """Batch renormalisation per member and unit of ``x [E, B, W]``, with a per-member affine.

    ``train()`` mode normalises with :func:`batch_renorm` and updates the running statistics
    (``momentum`` is torch's convention: ``running <- (1 - m) running + m batch``); ``eval()``
    mode uses the running statistics only.
    """

    def __init__(
        self,
        n_members: int,
        width: int,
        momentum: float = 0.01,
        warmup_steps: int = 100_000,
        r_max: float = 3.0,
        d_max: float = 5.0,
        eps: float = 1e-3,
    ) -> None:
        super().__init__()
        if not 0.0 < momentum <= 1.0 or warmup_steps < 0 or r_max < 1.0 or d_max < 0.0:
            raise ValueError(
                f"EnsembleBatchRenorm: need 0 < momentum <= 1, warmup_steps >= 0, r_max >= 1, "
                f"d_max >= 0; got {momentum}, {warmup_steps}, {r_max}, {d_max}"
            )
        self.momentum, self.warmup_steps = momentum, warmup_steps
        self.r_max, self.d_max, self.eps = r_max, d_max, eps
        self.weight = nn.Parameter(torch.ones(n_members, 1, width))
        self.bias = nn.Parameter(torch.zeros(n_members, 1, width))
        self.register_buffer("running_mean", torch.zeros(n_members, 1, width))
        self.register_buffer("running_var", torch.ones(n_members, 1, width))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            x_hat = (x - self.running_mean) / (self.running_var + self.eps).sqrt()
            return x_hat * self.weight + self.bias
        renorm = int(self.steps) >= self.warmup_steps
        x_hat, mean, var = batch_renorm(
            x, self.running_mean, self.running_var, self.r_max, self.d_max, self.eps, renorm
        )
        with torch.no_grad():
            self.running_mean.lerp_(mean, self.momentum)
            self.running_var.lerp_(var, self.momentum)
            self.steps += 1
        return x_hat * self.weight + self.bias
