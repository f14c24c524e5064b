"""KL estimators: zeros, sign, clamps, and Monte-Carlo consistency with the exact KL."""

from __future__ import annotations

import math

import pytest
import torch

from learner.algorithms.kl import KL_ESTIMATORS, kl_estimate, kl_loss, kl_penalized_rewards

T = torch.tensor


@pytest.mark.parametrize("kind", ["k1", "k2", "k3"])
def test_zero_when_equal(kind: str):
    logp = torch.randn(3, 5)
    assert torch.equal(kl_estimate(logp, logp.clone(), kind), torch.zeros(3, 5))


def test_hand_values():
    logp, ref = T([0.0]), T([math.log(2.0)])  # d = ref - logp = ln 2
    assert float(kl_estimate(logp, ref, "k1")) == pytest.approx(-math.log(2.0))
    assert float(kl_estimate(logp, ref, "k2")) == pytest.approx(0.5 * math.log(2.0) ** 2)
    assert float(kl_estimate(logp, ref, "k3")) == pytest.approx(2.0 - math.log(2.0) - 1.0)


def test_k3_nonnegative_and_clamped():
    gen = torch.Generator().manual_seed(0)
    logp, ref = torch.randn(1000, generator=gen) * 5, torch.randn(1000, generator=gen) * 5
    k3 = kl_estimate(logp, ref, "k3")
    assert (k3 >= 0).all() and (k3 <= 10.0).all()
    assert float(kl_estimate(T([0.0]), T([50.0]), "k3")) == 10.0  # exp(20) clamped to 10
    # d = -50 is clamped to -20: exp(-20) + 20 - 1 ~ 19 -> output clamp 10
    assert float(kl_estimate(T([50.0]), T([0.0]), "k3")) == 10.0
    assert kl_estimate(T([0.0]), T([1e4]), "k3").isfinite().all()


def test_monte_carlo_mean_matches_exact_kl():
    gen = torch.Generator().manual_seed(0)
    logits_p, logits_q = torch.randn(6, generator=gen), torch.randn(6, generator=gen)
    logp_all, logq_all = logits_p.log_softmax(0), logits_q.log_softmax(0)
    exact = float((logp_all.exp() * (logp_all - logq_all)).sum())
    x = torch.multinomial(logp_all.exp(), 200_000, replacement=True, generator=gen)
    logp, ref = logp_all[x], logq_all[x]
    for kind in ("k1", "k3"):  # both unbiased for KL(p || q) under x ~ p
        assert float(kl_estimate(logp, ref, kind).mean()) == pytest.approx(exact, rel=0.03)
    # k3 has lower variance than k1 here (the reason it is the default loss estimator).
    assert kl_estimate(logp, ref, "k3").var() < kl_estimate(logp, ref, "k1").var()


def test_kl_loss_and_reward_penalty():
    logp = T([[0.0, 0.0, 5.0]], requires_grad=True)
    ref = T([[math.log(2.0), 0.0, 0.0]])
    mask = T([[1.0, 1.0, 0.0]])
    loss = kl_loss(logp, ref, mask, kind="k3")
    assert float(loss.detach()) == pytest.approx((1.0 - math.log(2.0)) / 2)
    (grad,) = torch.autograd.grad(loss, logp)
    # d k3 / d logp = 1 - exp(ref - logp) -> (1 - 2) / 2 tokens at token 0
    torch.testing.assert_close(grad, T([[-0.5, 0.0, 0.0]]))
    rewards = kl_penalized_rewards(T([[0.0, 1.0, 7.0]]), logp, ref, mask, beta=0.1, kind="k1")
    torch.testing.assert_close(rewards, T([[0.1 * math.log(2.0), 1.0, 0.0]]))
    assert set(KL_ESTIMATORS.names()) >= {"k1", "k2", "k3", "low_var_kl"}
