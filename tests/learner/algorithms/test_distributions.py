"""Tanh-Gaussian change of variables, action bins, binned categorical, chunk log-probs."""

from __future__ import annotations

import math

import pytest
import torch

from learner.algorithms.distributions import (
    ActionBins,
    BinnedCategorical,
    TanhGaussian,
    chunk_log_prob,
)

T = torch.tensor


def _normal_cdf(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def test_tanh_gaussian_log_prob_matches_numerical_change_of_variables():
    """Density of a = tanh(u) from finite differences of P(a <= x) = Phi((atanh x - mu) / sigma)."""
    mu, sigma = 0.3, 0.8
    dist = TanhGaussian(T([[mu]], dtype=torch.float64), T([[math.log(sigma)]], dtype=torch.float64))
    a = torch.linspace(-0.99, 0.99, 41, dtype=torch.float64)
    h = 1e-6
    cdf = lambda x: _normal_cdf((torch.atanh(x) - mu) / sigma)  # noqa: E731
    numeric = torch.log((cdf(a + h) - cdf(a - h)) / (2 * h))
    analytic = dist.log_prob(a.unsqueeze(-1))
    torch.testing.assert_close(analytic, numeric, rtol=1e-5, atol=1e-5)
    # ... and a plain Gaussian density (no tanh correction) would be visibly wrong.
    plain = torch.distributions.Normal(mu, sigma).log_prob(torch.atanh(a))
    assert (plain - numeric).abs().max() > 1.0


def test_tanh_gaussian_density_integrates_to_one_and_sums_over_dims():
    dist = TanhGaussian(T([[-0.5]], dtype=torch.float64), T([[0.2]], dtype=torch.float64))
    a = torch.linspace(-1 + 1e-9, 1 - 1e-9, 200_001, dtype=torch.float64)
    dens = dist.log_prob(a.unsqueeze(-1)).exp()
    assert float(torch.trapezoid(dens, a)) == pytest.approx(1.0, abs=1e-3)
    mean, log_std = T([[0.1, -0.4]]), T([[-0.3, 0.1]])
    joint = TanhGaussian(mean, log_std).log_prob(T([[0.2, -0.7]]))
    parts = [
        TanhGaussian(mean[:, i : i + 1], log_std[:, i : i + 1]).log_prob(T([[x]]))
        for i, x in enumerate([0.2, -0.7])
    ]
    torch.testing.assert_close(joint, parts[0] + parts[1])


def test_tanh_gaussian_rsample_is_consistent_and_differentiable():
    mean = torch.zeros(256, 3, requires_grad=True)
    log_std = torch.full((256, 3), -0.5, requires_grad=True)
    dist = TanhGaussian(mean, log_std)
    action, logp = dist.rsample()
    assert action.shape == (256, 3) and logp.shape == (256,)
    assert (action.abs() < 1).all()
    torch.testing.assert_close(logp, dist.log_prob(action), rtol=1e-4, atol=1e-4)
    action.sum().backward()
    assert mean.grad is not None and mean.grad.abs().sum() > 0
    torch.testing.assert_close(dist.mode(), torch.zeros(256, 3))
    # Saturated samples stay finite thanks to the stable log(1 - tanh^2).
    far = TanhGaussian(T([[30.0]]), T([[0.0]]))
    assert torch.isfinite(far.rsample()[1]).all() and torch.isfinite(far.log_prob(T([[1.0]]))).all()
    assert far.entropy_estimate(4).shape == (1,)


def test_action_bins_openvla_style():
    bins = ActionBins(256, -1.0, 1.0)
    ids = bins.encode(T([-1.0, -0.99609375, 0.0, 0.999, 1.0, 5.0, -5.0]))
    assert ids.tolist() == [0, 0, 128, 255, 255, 255, 0]
    assert float(bins.decode(T([0]))) == pytest.approx(-1.0 + 1.0 / 256)
    x = torch.rand(10_000) * 2 - 1
    assert float((bins.decode(bins.encode(x)) - x).abs().max()) <= 1.0 / 256 + 1e-6
    tokens = bins.to_tokens(T([0, 255]), vocab_size=32000)
    assert tokens.tolist() == [31744, 31999]
    assert bins.from_tokens(tokens, 32000).tolist() == [0, 255]
    with pytest.raises(ValueError, match="n_bins"):
        ActionBins(1)


def test_binned_categorical():
    logits = torch.zeros(2, 7, 256)
    logits[..., 10] = 5.0
    dist = BinnedCategorical(logits)
    assert dist.mode().shape == (2, 7) and (dist.mode() == 10).all()
    z = math.exp(5.0) + 255
    hot, cold = torch.full((2, 7), 10), torch.zeros(2, 7, dtype=torch.long)
    torch.testing.assert_close(dist.log_prob(hot), torch.full((2, 7), 5.0 - math.log(z)))
    torch.testing.assert_close(dist.log_prob(cold), torch.full((2, 7), -math.log(z)))
    samples = dist.sample(torch.Generator().manual_seed(0))
    assert samples.shape == (2, 7) and samples.dtype == torch.int64
    uniform = BinnedCategorical(torch.zeros(3, 256))
    torch.testing.assert_close(uniform.entropy(), torch.full((3,), math.log(256.0)))


def test_chunk_log_prob():
    logp = T([[[-1.0, -2.0], [-0.5, -0.5], [-3.0, 0.0]]])  # [B=1, chunk=3, A=2]
    torch.testing.assert_close(chunk_log_prob(logp, "action"), T([[-3.0, -1.0, -3.0]]))
    torch.testing.assert_close(chunk_log_prob(logp, "chunk"), T([-7.0]))
    torch.testing.assert_close(chunk_log_prob(logp, "chunk", mask=T([[1.0, 1.0, 0.0]])), T([-4.0]))
    with pytest.raises(ValueError, match="reduce"):
        chunk_log_prob(logp, "token")
