"""DAPO pieces: dynamic-sampling group filter and overlong reward shaping.

(Clip-higher is ``clip_high`` in :func:`learner.algorithms.policy_loss.ppo_policy_loss`;
token-level loss is the ``token-mean`` aggregation mode.)
"""

from __future__ import annotations

import torch
from torch import Tensor


def dynamic_sampling_mask(scores: Tensor, group_size: int, per_sample: bool = True) -> Tensor:
    """Keep-mask of groups whose scores are *not* all equal.

    A group where every sample got the same reward (all correct, all wrong) has zero
    group-relative advantage everywhere: it adds no gradient, only dilutes the batch.
    DAPO drops such groups and keeps sampling until the batch is full.

    Args:
        scores: ``[N]`` with ``N = groups * group_size`` contiguous groups.
        group_size: samples per group.
        per_sample: True -> bool ``[N]`` (index the batch with it); False -> bool ``[groups]``.
    """
    if scores.dim() != 1 or group_size < 1 or scores.numel() % group_size:
        raise ValueError(
            f"scores must be [N] with N divisible by group_size={group_size}, "
            f"got shape {tuple(scores.shape)}"
        )
    grouped = scores.reshape(-1, group_size)
    keep = ~(grouped == grouped[:, :1]).all(dim=1)
    return keep.repeat_interleave(group_size) if per_sample else keep


def overlong_penalty(lengths: Tensor, max_len: int, buffer: int, factor: float = 1.0) -> Tensor:
    """Soft overlong punishment added to the reward of each response.

    ``expected = max_len - buffer``; ``penalty = min(-(len - expected) / buffer * factor, 0)``:
    0 up to ``expected``, then linear down to ``-factor`` at ``len = max_len``. A soft ramp
    instead of a hard cut-off stops punishing good-but-long reasoning as if it were wrong.
    """
    if buffer <= 0 or buffer > max_len:
        raise ValueError(f"buffer must be in (0, max_len={max_len}], got {buffer}")
    expected = max_len - buffer
    over = lengths.to(torch.float32) - expected
    return torch.clamp(-over / buffer * factor, max=0.0)
