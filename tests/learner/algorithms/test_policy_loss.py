"""PPO clipping / dual clip gradients, value clipping, entropy, registry."""

from __future__ import annotations

import math

import pytest
import torch

from learner.algorithms.policy_loss import (
    POLICY_LOSSES,
    entropy_from_logits,
    entropy_loss,
    ppo_policy_loss,
    value_loss,
)

T = torch.tensor


def _grad_at_ratio(ratio: float, adv: float, **kw) -> tuple[float, float]:
    logp = torch.zeros(1, 1, requires_grad=True)
    old = torch.full((1, 1), -math.log(ratio))
    loss, _ = ppo_policy_loss(logp, old, T([[adv]]), torch.ones(1, 1), **kw)
    (grad,) = torch.autograd.grad(loss, logp)
    return float(loss.detach()), float(grad)


def test_ratio_one_gives_minus_token_mean_advantage():
    adv = T([[1.0, -2.0, 3.0], [0.5, 7.0, 7.0]])
    mask = T([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    logp = torch.randn(2, 3)
    loss, metrics = ppo_policy_loss(logp, logp.clone(), adv, mask)
    torch.testing.assert_close(loss, T(-(1.0 - 2.0 + 3.0 + 0.5) / 4))
    assert metrics["clip_frac"] == 0.0 and metrics["ratio_mean"] == pytest.approx(1.0)
    assert metrics["approx_kl"] == pytest.approx(0.0, abs=1e-7)


def test_zero_gradient_outside_trust_region():
    # A > 0 and ratio 1.5 > 1 + clip_high: loss = -A (1 + clip_high), flat in logp.
    loss, grad = _grad_at_ratio(1.5, 2.0, clip_low=0.2, clip_high=0.28)
    assert grad == 0.0 and loss == pytest.approx(-2.0 * 1.28)
    # A < 0 and ratio 0.5 < 1 - clip_low: loss = -A (1 - clip_low), flat.
    loss, grad = _grad_at_ratio(0.5, -1.0, clip_low=0.2, clip_high=0.28)
    assert grad == 0.0 and loss == pytest.approx(0.8)


def test_gradient_inside_trust_region_and_clip_higher_asymmetry():
    # d/dlogp (-A r) = -A r
    _, grad = _grad_at_ratio(1.1, 2.0)
    assert grad == pytest.approx(-2.2)
    # ratio 1.25: clipped with the symmetric 0.2, still learning with DAPO's clip_high 0.28.
    assert _grad_at_ratio(1.25, 1.0, clip_high=0.2)[1] == 0.0
    assert _grad_at_ratio(1.25, 1.0, clip_high=0.28)[1] == pytest.approx(-1.25)
    # A < 0 with large ratio is *not* clipped by plain PPO (pessimistic max keeps -A r).
    assert _grad_at_ratio(5.0, -2.0)[1] == pytest.approx(10.0)


def test_dual_clip_constant_loss_for_negative_advantage():
    loss, grad = _grad_at_ratio(5.0, -2.0, dual_clip=3.0)
    assert loss == pytest.approx(6.0) and grad == 0.0  # -c A = 3 * 2
    assert _grad_at_ratio(5.0, -2.0)[0] == pytest.approx(10.0)  # without it: -A r
    # ratio below c: dual clip inactive.
    assert _grad_at_ratio(2.0, -2.0, dual_clip=3.0)[0] == pytest.approx(4.0)
    # positive advantages are never dual-clipped.
    assert _grad_at_ratio(5.0, 1.0, dual_clip=3.0)[0] == pytest.approx(-1.2)
    with pytest.raises(ValueError, match="> 1"):
        _grad_at_ratio(1.0, 1.0, dual_clip=0.5)


def test_metrics_clip_frac():
    logp = torch.zeros(1, 4)
    old = -torch.log(T([[1.5, 1.0, 0.5, 1.1]]))
    _, m = ppo_policy_loss(logp, old, T([[1.0, 1.0, -1.0, 1.0]]), torch.ones(1, 4))
    assert m["clip_frac"] == pytest.approx(0.5)  # tokens 0 and 2
    assert m["ratio_mean"] == pytest.approx((1.5 + 1.0 + 0.5 + 1.1) / 4)


def test_log_ratio_clamp_avoids_inf():
    loss, _ = ppo_policy_loss(T([[100.0]]), T([[0.0]]), T([[-1.0]]), torch.ones(1, 1))
    assert torch.isfinite(loss) and float(loss) == pytest.approx(math.exp(20.0), rel=1e-5)


def test_value_loss_clipping():
    mask = torch.ones(1, 3)
    values = T([[2.0, 1.0, 1.6]], requires_grad=True)
    old, ret = T([[1.0, 2.0, 1.0]]), T([[1.5, 2.5, 1.7]])
    loss, m = value_loss(values, old, ret, mask, clip=0.2, agg_mode="seq-mean-token-sum")
    # 0.5*max(.25,.09) + 0.5*max(2.25,.49) + 0.5*max(.01,.25) = .125 + 1.125 + .125
    assert float(loss.detach()) == pytest.approx(1.375)
    (grad,) = torch.autograd.grad(loss, values)
    torch.testing.assert_close(grad, T([[0.5, -1.5, 0.0]]))  # 3rd: clipped branch, flat
    assert m["vf_clip_frac"] == pytest.approx(1 / 3)
    unclipped, _ = value_loss(values, old, ret, mask, clip=None, agg_mode="seq-mean-token-sum")
    assert float(unclipped.detach()) == pytest.approx(0.125 + 1.125 + 0.005)


def test_entropy():
    ent = entropy_from_logits(torch.zeros(2, 3, 4))
    torch.testing.assert_close(ent, torch.full((2, 3), math.log(4.0)))
    mask = T([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(entropy_loss(ent, mask), T(-math.log(4.0)))


def test_registry():
    assert POLICY_LOSSES.get("ppo") is ppo_policy_loss
    logp = torch.randn(2, 3)
    adv = torch.randn(2, 3)
    pg, _ = POLICY_LOSSES.get("pg")(logp, logp, adv, torch.ones(2, 3), clip_low=0.2)
    ppo, _ = ppo_policy_loss(logp, logp, adv, torch.ones(2, 3))
    torch.testing.assert_close(pg, ppo)
