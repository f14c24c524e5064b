"""Batch renormalisation: hand values, clipping, gradients, warm-up and running statistics."""

from __future__ import annotations

import pytest
import torch

from learner.algorithms.batch_renorm import EnsembleBatchRenorm, batch_renorm

T = torch.tensor
X = T([[[0.0], [2.0]]])  # one member, batch of 2, one unit: mean 1, biased var 1


def test_unclipped_renorm_equals_running_statistics_in_value():
    # running mean 0, var 4 (std 2): r = 1 / 2, d = (1 - 0) / 2; (x - mu_B) / 1 * r + d = x / 2
    x_hat, mean, var = batch_renorm(X, T([[[0.0]]]), T([[[4.0]]]), eps=0.0)
    torch.testing.assert_close(x_hat, T([[[0.0], [1.0]]]))
    torch.testing.assert_close((mean, var), (T([[[1.0]]]), T([[[1.0]]])))
    plain, _, _ = batch_renorm(X, T([[[0.0]]]), T([[[4.0]]]), eps=0.0, renorm=False)
    torch.testing.assert_close(plain, T([[[-1.0], [1.0]]]))  # plain BatchNorm


def test_r_and_d_are_clipped():
    # running std 10: r = 0.1 -> 1/3, d = 0.1
    x_hat, _, _ = batch_renorm(X, T([[[0.0]]]), T([[[100.0]]]), r_max=3.0, eps=0.0)
    torch.testing.assert_close(x_hat, T([[[-1 / 3 + 0.1], [1 / 3 + 0.1]]]))
    # running mean -100, std 1: r = 1, d = 101 -> 5
    x_hat, _, _ = batch_renorm(X, T([[[-100.0]]]), T([[[1.0]]]), d_max=5.0, eps=0.0)
    torch.testing.assert_close(x_hat, T([[[4.0], [6.0]]]))


def test_gradient_flows_through_batch_statistics_not_r_d():
    """sum(x_hat) is constant under batch normalisation (r, d are constants): zero gradient,
    while the evaluation-mode function (x - mu) / sigma has gradient 1 / sigma = 0.5."""
    x = X.clone().requires_grad_(True)
    x_hat, _, _ = batch_renorm(x, T([[[0.0]]]), T([[[4.0]]]), eps=0.0)
    (grad,) = torch.autograd.grad(x_hat.sum(), x)
    torch.testing.assert_close(grad, torch.zeros_like(X))


def test_module_warmup_running_stats_and_eval():
    norm = EnsembleBatchRenorm(2, 1, momentum=0.5, warmup_steps=1, eps=0.0)
    x = torch.cat([X, 3.0 * X])  # member 1: mean 3, var 9
    first = norm(x)  # warm-up pass: plain BatchNorm
    torch.testing.assert_close(first, T([[[-1.0], [1.0]], [[-1.0], [1.0]]]))
    # running <- 0.5 running + 0.5 batch, per member
    torch.testing.assert_close(norm.running_mean, T([[[0.5]], [[1.5]]]))
    torch.testing.assert_close(norm.running_var, T([[[1.0]], [[5.0]]]))
    assert int(norm.steps) == 1
    second = norm(x)  # renormalised towards the running statistics
    r0, d0 = 1.0 / 1.0, (1.0 - 0.5) / 1.0
    torch.testing.assert_close(second[0], T([[-r0 + d0], [r0 + d0]]))
    norm.eval()
    before = norm.running_mean.clone()
    out = norm(x)
    torch.testing.assert_close(norm.running_mean, before)  # eval does not update
    expected = (x - norm.running_mean) / norm.running_var.sqrt()
    torch.testing.assert_close(out, expected)


def test_affine_parameters_are_per_member():
    norm = EnsembleBatchRenorm(3, 4)
    assert norm.weight.shape == norm.bias.shape == (3, 1, 4)
    with pytest.raises(ValueError, match="r_max"):
        EnsembleBatchRenorm(1, 1, r_max=0.5)
