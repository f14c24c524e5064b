"""Policy-gradient losses (PPO clip-higher / dual-clip, vanilla PG), value and entropy losses.

All per-token losses are reduced with :func:`learner.algorithms.aggregation.aggregate`, so
``agg_mode`` and the global ``normalizer`` make them independent of micro-batch splits.
Policy losses are registered in :data:`POLICY_LOSSES` with one shared signature
``fn(logp, old_logp, advantages, mask, **cfg) -> (loss, metrics)``; configs pick one
with ``algorithm.loss: ppo``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from learner.algorithms.aggregation import aggregate, masked_mean
from rlinf_contracts.registry import Registry

POLICY_LOSSES: Registry[Callable[..., tuple[Tensor, dict[str, float]]]] = Registry("policy loss")

LOG_RATIO_CLAMP = 20.0


def _ratio(logp: Tensor, old_logp: Tensor) -> tuple[Tensor, Tensor]:
    """``(log r, r)`` with ``log r = clamp(logp - old_logp, -20, 20)`` to avoid inf ratios."""
    log_ratio = torch.clamp(logp - old_logp.detach(), -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return log_ratio, torch.exp(log_ratio)


@POLICY_LOSSES.register("ppo")
def ppo_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg_mode: str = "token-mean",
    normalizer: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate with asymmetric clipping and optional dual clip.

    ``r = exp(clamp(logp - old_logp, -20, 20))``,
    ``L = max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high))``; with ``dual_clip = c > 1``
    and ``A < 0``: ``L = min(L, -A c)``.

    Why each piece: the clip removes the incentive to move ``r`` outside the trust
    region (zero gradient there); DAPO's clip-higher (``clip_high`` 0.28 > ``clip_low``
    0.2) lets low-probability tokens with positive advantage grow, which fights entropy
    collapse; the dual clip bounds the loss when ``A < 0`` and ``r`` is huge (a stale,
    very off-policy sample), where the plain PPO loss is unbounded.

    Returns:
        ``(loss, metrics)`` with metrics ``clip_frac`` (tokens where the clipped branch
        is active), ``dual_clip_frac``, ``approx_kl`` (k3 estimate of KL(old || new),
        ``(r - 1) - log r``, from samples of the old policy), ``ratio_mean``.
    """
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1 (e.g. 3.0), got {dual_clip}")
    adv = advantages.detach()
    log_ratio, ratio = _ratio(logp, old_logp)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss_mat = torch.maximum(unclipped, clipped)
    dual_active = torch.zeros_like(loss_mat, dtype=torch.bool)
    if dual_clip is not None:
        bound = -adv * dual_clip
        dual_active = (adv < 0) & (loss_mat > bound)
        loss_mat = torch.where(dual_active, bound, loss_mat)
    loss = aggregate(loss_mat, mask, agg_mode, normalizer)
    with torch.no_grad():
        metrics = {
            "clip_frac": float(masked_mean((clipped > unclipped).float(), mask)),
            "dual_clip_frac": float(masked_mean(dual_active.float(), mask)),
            "approx_kl": float(masked_mean(torch.expm1(log_ratio) - log_ratio, mask)),
            "ratio_mean": float(masked_mean(ratio, mask)),
        }
    return loss, metrics


@POLICY_LOSSES.register("pg")
def pg_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    agg_mode: str = "token-mean",
    normalizer: float | None = None,
    **_: Any,
) -> tuple[Tensor, dict[str, float]]:
    """Unclipped importance-weighted policy gradient ``L = -A r``.

    On-policy (``r = 1``) its gradient is REINFORCE's ``-A grad log pi``; clip settings
    passed by a shared config are ignored.
    """
    log_ratio, ratio = _ratio(logp, old_logp)
    loss = aggregate(-advantages.detach() * ratio, mask, agg_mode, normalizer)
    with torch.no_grad():
        metrics = {
            "clip_frac": 0.0,
            "approx_kl": float(masked_mean(torch.expm1(log_ratio) - log_ratio, mask)),
            "ratio_mean": float(masked_mean(ratio, mask)),
        }
    return loss, metrics


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip: float | None = None,
    agg_mode: str = "token-mean",
    normalizer: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Critic loss ``0.5 max((V - R)^2, (V_clip - R)^2)``.

    ``V_clip = V_old + clip(V - V_old, -clip, clip)``.
    Value clipping (PPO's trick) keeps the critic from jumping far from the values that
    produced the advantages; with ``clip=None`` it is plain ``0.5 (V - R)^2``.
    """
    target = returns.detach()
    err = (values - target).square()
    if clip is None:
        loss_mat = 0.5 * err
        clip_frac = torch.zeros((), dtype=values.dtype)
    else:
        old = old_values.detach()
        v_clipped = old + torch.clamp(values - old, -clip, clip)
        err_clipped = (v_clipped - target).square()
        loss_mat = 0.5 * torch.maximum(err, err_clipped)
        clip_frac = masked_mean((err_clipped > err).float(), mask)
    loss = aggregate(loss_mat, mask, agg_mode, normalizer)
    value_mean = float(masked_mean(values.detach(), mask))
    return loss, {"vf_clip_frac": float(clip_frac), "value_mean": value_mean}


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of categorical distributions ``H = -sum_k p_k log p_k`` over the last dim."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def entropy_loss(
    entropy: Tensor,
    mask: Tensor,
    agg_mode: str = "token-mean",
    normalizer: float | None = None,
) -> Tensor:
    """Entropy *loss* ``-aggregate(H)``: add ``coef * entropy_loss`` to the total loss to
    reward exploration (minimising it maximises entropy)."""
    return -aggregate(entropy, mask, agg_mode, normalizer)
