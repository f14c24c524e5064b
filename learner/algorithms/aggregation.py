"""Loss aggregation over ``[B, T]`` per-token losses, invariant to micro-batching.

Every mode is ``numerator(batch) / normalizer``, where the numerator is a plain sum over
the rows of the batch and the normalizer is a *global* constant. Passing the normalizer
of the full (global) batch to each micro-batch therefore makes

    sum_k aggregate(L_k, m_k, mode, global_normalizer(m, mode)) == aggregate(L, m, mode)

so gradient accumulation (and data parallelism with a *summed* gradient all-reduce;
multiply by the world size when the all-reduce averages) gives exactly the full-batch
gradient, however rows are split. A sequence is never split across micro-batches.

Modes (``m`` the mask, ``n_b = sum_t m_{b,t}``, ``S`` the non-empty rows):

- ``token-mean``:              ``sum_{b,t} L m / sum_{b,t} m``  (every token weighs the same)
- ``seq-mean-token-sum``:      ``sum_{b in S} (sum_t L m) / |S|``
- ``seq-mean-token-mean``:     ``sum_{b in S} (sum_t L m / n_b) / |S|``  (every sequence weighs
  the same, GRPO's original choice; it under-weights tokens of long answers)
- ``seq-mean-token-sum-norm``: ``sum_{b in S} (sum_t L m / C) / |S|`` with a constant ``C``
  (Dr.GRPO; default the padded length ``T``, in practice the generation limit): the mean over
  sequences of ``token-sum / C``. No length bias, no dependence on the batch's token count and,
  like every mode here, no growth with the number of sequences. This is verl 0.9.1's
  ``agg_loss`` and Dr.GRPO's reference (``masked_sum(L, m, -1) / max_len``, then the batch mean).

Fully masked rows contribute 0 to every numerator and are not counted in ``|S|``.
"""

from __future__ import annotations

import torch
from torch import Tensor

AGG_MODES: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)


def _check_mode(mode: str) -> None:
    if mode not in AGG_MODES:
        raise ValueError(f"unknown aggregation mode {mode!r}; choose one of {list(AGG_MODES)}")


def global_normalizer(mask: Tensor, mode: str, norm_constant: float | None = None) -> float:
    """Denominator of ``mode`` computed on the full (global) batch ``mask``.

    ``token-mean``: total valid tokens; ``seq-mean-token-sum`` / ``seq-mean-token-mean``:
    number of non-empty rows ``|S|``; ``seq-mean-token-sum-norm``: ``|S| * norm_constant``
    (default constant ``mask.shape[-1]``). Counts are clamped to >= 1 so an all-masked batch
    yields a 0 loss, not NaN.
    """
    _check_mode(mode)
    if mode == "token-mean":
        return max(float(mask.float().sum()), 1.0)
    rows = max(float((mask.float().sum(dim=-1) > 0).sum()), 1.0)
    if mode == "seq-mean-token-sum-norm":
        const = float(norm_constant if norm_constant is not None else mask.shape[-1])
        if const <= 0:
            raise ValueError(f"norm_constant of seq-mean-token-sum-norm must be > 0, got {const}")
        return rows * const
    return rows


def aggregate(
    loss_mat: Tensor, mask: Tensor, mode: str, normalizer: float | Tensor | None = None
) -> Tensor:
    """Reduce ``loss_mat [B, T]`` under ``mask`` to a scalar; see the module docstring.

    Args:
        loss_mat: per-token loss ``[B, T]`` (or ``[B]`` treated as one token per row).
        mask: 1 at valid positions, same shape.
        mode: one of :data:`AGG_MODES`.
        normalizer: the global denominator (see :func:`global_normalizer`); None
            computes it from this batch, which is right only for the full batch.
    """
    _check_mode(mode)
    if loss_mat.dim() == 1:
        loss_mat, mask = loss_mat.unsqueeze(-1), mask.unsqueeze(-1)
    if loss_mat.shape != mask.shape:
        raise ValueError(f"loss {tuple(loss_mat.shape)} and mask {tuple(mask.shape)} differ")
    m = mask.to(loss_mat.dtype)
    # where() rather than L * m so that inf/NaN written into padding cannot leak in.
    masked = torch.where(m > 0, loss_mat, torch.zeros_like(loss_mat)) * m
    if normalizer is None:
        normalizer = global_normalizer(mask, mode)
    if mode == "seq-mean-token-mean":
        per_seq = masked.sum(dim=-1) / m.sum(dim=-1).clamp_min(1.0)
        return per_seq.sum() / normalizer
    return masked.sum() / normalizer


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """``sum(x m) / max(sum(m), 1)``: the token-mean of ``x`` for metrics."""
    m = mask.to(x.dtype)
    return (torch.where(m > 0, x, torch.zeros_like(x)) * m).sum() / m.sum().clamp_min(1.0)


def step_weights(mask: Tensor, mode: str, norm_constant: float | None = None) -> Tensor:
    """Per-token weights ``w`` [B, T] with ``token-mean(L * w) == aggregate(L, mask, mode)``.

    For learners that shuffle single tokens (env steps) into minibatches rather than whole
    rows: each minibatch's plain mean of ``w * L`` is then an unbiased estimate of the ``mode``
    loss of the full batch. ``w = N * c_b`` on valid tokens (``N`` valid tokens, ``c_b`` the
    weight ``mode`` gives each token of row ``b``), 0 elsewhere; all 1 for ``token-mean``.

    >>> m = torch.tensor([[1., 1., 1., 1.], [1., 1., 0., 0.]])
    >>> step_weights(m, "seq-mean-token-mean")
    tensor([[0.7500, 0.7500, 0.7500, 0.7500],
            [1.5000, 1.5000, 0.0000, 0.0000]])
    """
    _check_mode(mode)
    m = mask.float()
    n = m.sum()
    if mode == "token-mean":
        return m.clone()
    norm = global_normalizer(mask, mode, norm_constant)
    per_row = (
        1.0 / m.sum(dim=-1, keepdim=True).clamp_min(1.0)
        if mode == "seq-mean-token-mean"
        else torch.ones_like(m[..., :1])
    )
    return m * per_row * n / norm
