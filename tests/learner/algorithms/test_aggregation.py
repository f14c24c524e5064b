"""Loss aggregation modes: hand values, empty rows, micro-batch invariance."""

from __future__ import annotations

import pytest
import torch

from learner.algorithms.aggregation import (
    AGG_MODES,
    aggregate,
    global_normalizer,
    masked_mean,
    step_weights,
)

T = torch.tensor
LOSS = T([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0], [7.0, 0.0, 0.0], [9.0, 9.0, 9.0]])
MASK = T([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 22 / 6),  # (6 + 9 + 7) / 6 valid tokens
        ("seq-mean-token-sum", 22 / 3),  # 3 non-empty rows; the all-masked row is not counted
        ("seq-mean-token-mean", (2.0 + 4.5 + 7.0) / 3),
        ("seq-mean-token-sum-norm", 22 / (3 * 3)),  # 3 non-empty rows, constant defaults to T = 3
    ],
)
def test_hand_values_and_empty_rows_not_counted(mode: str, expected: float):
    torch.testing.assert_close(aggregate(LOSS, MASK, mode), torch.tensor(expected))


def test_norm_constant_and_global_normalizer_values():
    norm = global_normalizer(MASK, "seq-mean-token-sum-norm", norm_constant=10.0)
    assert norm == 30.0  # |S| = 3 non-empty rows times the constant
    torch.testing.assert_close(aggregate(LOSS, MASK, "seq-mean-token-sum-norm", norm), T(22 / 30))
    assert global_normalizer(MASK, "token-mean") == 6.0
    assert global_normalizer(MASK, "seq-mean-token-mean") == 3.0
    assert global_normalizer(MASK, "seq-mean-token-sum-norm", norm_constant=512) == 3 * 512.0
    assert global_normalizer(torch.zeros(2, 3), "token-mean") == 1.0  # no NaN on empty batches


def _verl_091_seq_mean_token_sum_norm(
    loss: torch.Tensor, mask: torch.Tensor, const: float
) -> torch.Tensor:
    """verl 0.9.1 ``agg_loss`` (dp_size 1), restated: the mean over non-empty rows of
    ``token-sum``, divided by the constant."""
    seq = (loss * mask).sum(-1)
    keep = mask.sum(-1) > 0
    return seq[keep].sum() / keep.sum() / const


def _dr_grpo_reference(loss: torch.Tensor, mask: torch.Tensor, max_len: float) -> torch.Tensor:
    """Dr.GRPO's reference: per-sequence ``masked_sum / generate_max_length``, batch mean."""
    return ((loss * mask).sum(-1) / max_len).mean()


def test_seq_mean_token_sum_norm_matches_verl_and_dr_grpo():
    gen = torch.Generator().manual_seed(1)
    loss = torch.randn(6, 5, generator=gen)
    lengths = T([5, 1, 3, 2, 4, 5])
    mask = (torch.arange(5).unsqueeze(0) < lengths.unsqueeze(1)).float()
    got = aggregate(
        loss,
        mask,
        "seq-mean-token-sum-norm",
        global_normalizer(mask, "seq-mean-token-sum-norm", norm_constant=8.0),
    )
    torch.testing.assert_close(got, _verl_091_seq_mean_token_sum_norm(loss, mask, 8.0))
    torch.testing.assert_close(got, _dr_grpo_reference(loss, mask, 8.0))  # no empty rows here


@pytest.mark.parametrize("mode", AGG_MODES)
def test_scale_does_not_grow_with_batch_size(mode: str):
    """Repeating the batch k times is the same data: every mode must give the same loss
    (the old ``sum / C`` of seq-mean-token-sum-norm grew k-fold)."""
    one = aggregate(LOSS, MASK, mode)
    for k in (2, 8):
        torch.testing.assert_close(aggregate(LOSS.repeat(k, 1), MASK.repeat(k, 1), mode), one)


def test_norm_constant_must_be_positive():
    with pytest.raises(ValueError, match="norm_constant"):
        global_normalizer(MASK, "seq-mean-token-sum-norm", norm_constant=0.0)


def test_nan_in_padding_does_not_leak():
    loss = LOSS.clone()
    loss[3] = float("nan")
    loss[1, 2] = float("inf")
    for mode in AGG_MODES:
        torch.testing.assert_close(aggregate(loss, MASK, mode), aggregate(LOSS, MASK, mode))


@pytest.mark.parametrize("mode", AGG_MODES)
def test_uneven_micro_batches_with_global_normalizer_equal_full_batch(mode: str):
    gen = torch.Generator().manual_seed(0)
    lengths = T([5, 0, 3, 8, 1, 8, 2])
    mask = (torch.arange(8).unsqueeze(0) < lengths.unsqueeze(1)).float()
    params = torch.randn(7, 8, generator=gen, requires_grad=True)
    full = aggregate(params.square(), mask, mode)
    (full_grad,) = torch.autograd.grad(full, params)
    norm = global_normalizer(mask, mode)
    total, grad = torch.zeros(()), torch.zeros_like(params)
    for rows in (slice(0, 1), slice(1, 5), slice(5, 7)):  # sizes 1, 4, 2
        part = aggregate(params[rows].square(), mask[rows], mode, normalizer=norm)
        (g,) = torch.autograd.grad(part, params)
        total, grad = total + part.detach(), grad + g
    torch.testing.assert_close(total, full.detach())
    torch.testing.assert_close(grad, full_grad)


def test_micro_batches_without_global_normalizer_differ():
    """The reason the normaliser is passed in: local token-mean over uneven splits is wrong."""
    mask = T([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    loss = T([[1.0, 1.0, 1.0], [5.0, 0.0, 0.0]])
    parts = [aggregate(loss[i : i + 1], mask[i : i + 1], "token-mean") for i in range(2)]
    local = (parts[0] + parts[1]) / 2
    assert float(local) == pytest.approx(3.0)
    assert float(aggregate(loss, mask, "token-mean")) == pytest.approx(2.0)


def test_unknown_mode_lists_choices():
    with pytest.raises(ValueError, match="seq-mean-token-mean"):
        aggregate(LOSS, MASK, "token_mean")


@pytest.mark.parametrize("mode", AGG_MODES)
def test_step_weights_turn_a_plain_step_mean_into_the_mode(mode: str):
    """Learners that shuffle single env steps into minibatches apply a mode as per-step weights."""
    g = torch.Generator().manual_seed(0)
    loss = torch.randn(6, 9, generator=g)
    mask = (torch.arange(9) < torch.tensor([[9], [2], [5], [0], [7], [1]])).float()
    w = step_weights(mask, mode)
    torch.testing.assert_close(masked_mean(loss * w, mask), aggregate(loss, mask, mode))
    assert float(w[mask == 0].abs().sum()) == 0.0
    if mode == "seq-mean-token-mean":  # every non-empty row carries the same total weight
        per_row = w.sum(-1)[mask.sum(-1) > 0]
        torch.testing.assert_close(per_row, torch.full_like(per_row, float(per_row[0])))
