"""Q-function ensembles and target-network helpers shared by SAC, RLPD and IQL.

The ensemble is vectorised (one batched matmul per layer for all members) rather than a
Python list of MLPs: RLPD's 10 critics then cost about as much as one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from learner.algorithms.batch_renorm import EnsembleBatchRenorm


class EnsembleLinear(nn.Module):
    """``E`` independent linear layers applied to ``x [E, B, in] -> [E, B, out]``."""

    def __init__(self, n_members: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_dim)  # nn.Linear's default init, per member
        self.weight = nn.Parameter(torch.empty(n_members, in_dim, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n_members, 1, out_dim).uniform_(-bound, bound))

    def forward(self, x: Tensor) -> Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.LayerNorm):
    """LayerNorm over the last axis of ``x [E, B, W]`` with *per-member* scale and shift.

    A plain ``nn.LayerNorm(W)`` inside the vectorised ensemble would share its affine
    parameters across all ``E`` critics, coupling members that RLPD wants independent.
    Here ``weight`` and ``bias`` are ``[E, 1, W]``; the normalisation itself has no parameters.
    """

    def __init__(self, n_members: int, width: int, eps: float = 1e-5) -> None:
        super().__init__(width, eps=eps)
        self.weight = nn.Parameter(torch.ones(n_members, 1, width))
        self.bias = nn.Parameter(torch.zeros(n_members, 1, width))

    def forward(self, x: Tensor) -> Tensor:
        return (
            F.layer_norm(x, self.normalized_shape, None, None, self.eps) * self.weight + self.bias
        )


class CriticEnsemble(nn.Module):
    """``E`` MLP critics ``Q_j(s, a)``; ``forward(obs [B, D], act [B, A]) -> q [E, B]``.

    ``layer_norm=True`` puts LayerNorm after every hidden linear layer: RLPD's key
    ingredient, it bounds Q extrapolation on out-of-distribution actions when learning
    from offline data at a high update-to-data ratio; every member has its own LayerNorm
    scale and shift. ``act_dim = 0`` makes the same class a state-value ensemble.
    ``batch_norm=True`` normalises the input and every hidden layer with batch
    renormalisation instead (CrossQ, see ``crossq.py``; ``renorm_warmup_steps`` training
    passes of plain BatchNorm first, ``bn_momentum`` for the running statistics).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n_critics: int = 2,
        hidden: Sequence[int] = (256, 256),
        layer_norm: bool = False,
        batch_norm: bool = False,
        renorm_warmup_steps: int = 100_000,
        bn_momentum: float = 0.01,
    ) -> None:
        super().__init__()
        if layer_norm and batch_norm:
            raise ValueError("choose at most one of layer_norm (RLPD) and batch_norm (CrossQ)")
        self.n_critics = n_critics
        last = obs_dim + act_dim

        def renorm(width: int) -> nn.Module:
            return EnsembleBatchRenorm(n_critics, width, bn_momentum, renorm_warmup_steps)

        layers: list[nn.Module] = [renorm(last)] if batch_norm else []
        for width in hidden:
            layers.append(EnsembleLinear(n_critics, last, width))
            if layer_norm:
                layers.append(EnsembleLayerNorm(n_critics, width))
            if batch_norm:
                layers.append(renorm(width))
            layers.append(nn.ReLU())
            last = width
        layers.append(EnsembleLinear(n_critics, last, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: Tensor, act: Tensor | None = None) -> Tensor:
        x = obs if act is None else torch.cat([obs, act], dim=-1)
        x = x.unsqueeze(0).expand(self.n_critics, *x.shape)
        return self.net(x).squeeze(-1)


def random_subset_min(
    q: Tensor, subset_size: int | None, generator: torch.Generator | None = None
) -> Tensor:
    """``min_{j in J} Q_j`` over a random subset ``J`` of ``subset_size`` members ``[E, B] -> [B]``.

    ``subset_size=None`` (or >= E) is the plain clipped double-Q minimum. RLPD / REDQ use
    a random 2 of 10: the minimum over all 10 would be far too pessimistic.
    """
    n = q.shape[0]
    if subset_size is None or subset_size >= n:
        return q.min(dim=0).values
    idx = torch.randperm(n, generator=generator)[:subset_size].to(q.device)
    return q.index_select(0, idx).min(dim=0).values


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging ``theta' <- tau theta + (1 - tau) theta'`` (buffers copied).

    One for-each kernel per kind instead of one small kernel per tensor (a pixel critic has
    some 20 tensors, updated after every critic step)."""
    t_params, s_params = list(target.parameters()), list(source.parameters())
    if len(t_params) != len(s_params):
        raise ValueError(f"soft_update: {len(t_params)} target vs {len(s_params)} source tensors")
    if t_params:
        torch._foreach_lerp_(t_params, s_params, tau)
    t_bufs, s_bufs = list(target.buffers()), list(source.buffers())
    if len(t_bufs) != len(s_bufs):
        raise ValueError(f"soft_update: {len(t_bufs)} target vs {len(s_bufs)} source buffers")
    if t_bufs:
        torch._foreach_copy_(t_bufs, s_bufs)
