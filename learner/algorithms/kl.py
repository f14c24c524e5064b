"""KL estimators between the current policy and a reference, from sampled log-probs.

For tokens / actions ``x ~ pi`` with ``logp = log pi(x)`` and ``ref = log pi_ref(x)``,
``d = ref - logp`` (so ``exp(d) = pi_ref / pi``):

- ``k1 = logp - ref = -d``: unbiased for ``KL(pi || pi_ref)`` but high variance and can be < 0.
- ``k2 = 0.5 (logp - ref)^2``: biased, low variance, >= 0; its gradient is the
  gradient of the true KL to first order.
- ``k3 = exp(d) - d - 1``: unbiased and >= 0 (``e^x >= 1 + x``), low variance
  (Schulman's estimator, verl's ``low_var_kl``). ``d`` is clamped to [-20, 20] and the
  output to [-10, 10] so a single badly off-policy token cannot explode the loss.

Use them elementwise as a loss term (:func:`kl_loss`) or folded into per-token rewards
(:func:`kl_penalized_rewards`, as REINFORCE++ and PPO-RLHF do).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from learner.algorithms.aggregation import aggregate
from rlinf_contracts.registry import Registry

KL_ESTIMATORS: Registry[Callable[[Tensor, Tensor], Tensor]] = Registry("KL estimator")


@KL_ESTIMATORS.register("k1")
def kl_k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """``k1 = logp - ref``."""
    return logp - ref_logp


@KL_ESTIMATORS.register("k2")
def kl_k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """``k2 = 0.5 (logp - ref)^2``."""
    return 0.5 * (logp - ref_logp).square()


@KL_ESTIMATORS.register("k3")
def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """``k3 = exp(d) - d - 1``, ``d = clamp(ref - logp, -20, 20)``, output clamped to ±10."""
    d = torch.clamp(ref_logp - logp, min=-20.0, max=20.0)
    return torch.clamp(torch.exp(d) - d - 1.0, min=-10.0, max=10.0)


KL_ESTIMATORS.add("low_var_kl", kl_k3)


def kl_estimate(logp: Tensor, ref_logp: Tensor, kind: str = "k3") -> Tensor:
    """Elementwise KL estimate of ``kind`` (``k1`` | ``k2`` | ``k3``); same shape as inputs."""
    return KL_ESTIMATORS.get(kind)(logp, ref_logp)


def kl_loss(
    logp: Tensor,
    ref_logp: Tensor,
    mask: Tensor,
    kind: str = "k3",
    agg_mode: str = "token-mean",
    normalizer: float | None = None,
) -> Tensor:
    """KL as a loss term: ``aggregate(k(logp, ref), mask, agg_mode)`` (gradient flows to
    ``logp``; the reference is treated as a constant)."""
    return aggregate(kl_estimate(logp, ref_logp.detach(), kind), mask, agg_mode, normalizer)


def kl_penalized_rewards(
    token_rewards: Tensor,
    logp: Tensor,
    ref_logp: Tensor,
    mask: Tensor,
    beta: float,
    kind: str = "k1",
) -> Tensor:
    """KL as a reward penalty: ``r'_t = r_t - beta * k(logp_t, ref_t)`` at valid tokens.

    No gradient flows through the penalty (it shapes the return, it is not a loss).
    """
    kl = kl_estimate(logp.detach(), ref_logp.detach(), kind)
    return (token_rewards - beta * kl) * mask.to(token_rewards.dtype)
