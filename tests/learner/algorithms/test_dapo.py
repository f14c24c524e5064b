"""DAPO dynamic sampling and overlong shaping."""

from __future__ import annotations

import pytest
import torch

from learner.algorithms.advantages import grpo_advantages
from learner.algorithms.dapo import dynamic_sampling_mask, overlong_penalty

T = torch.tensor


def test_dynamic_sampling_drops_all_equal_groups():
    scores = T([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    keep = dynamic_sampling_mask(scores, 3)
    assert keep.tolist() == [False] * 3 + [True] * 3 + [False] * 3
    assert dynamic_sampling_mask(scores, 3, per_sample=False).tolist() == [False, True, False]
    # The dropped groups are exactly those with zero GRPO advantage.
    adv = grpo_advantages(scores, 3)
    assert torch.equal(adv[~keep], torch.zeros(6)) and (adv[keep] != 0).all()
    with pytest.raises(ValueError, match="divisible"):
        dynamic_sampling_mask(scores, 4)


def test_overlong_penalty_shape():
    lengths = T([0, 50, 80, 85, 90, 100])
    pen = overlong_penalty(lengths, max_len=100, buffer=20, factor=1.0)
    torch.testing.assert_close(pen, T([0.0, 0.0, 0.0, -0.25, -0.5, -1.0]))
    pen2 = overlong_penalty(lengths, max_len=100, buffer=20, factor=2.0)
    torch.testing.assert_close(pen2, 2.0 * pen)
    assert (pen <= 0).all()
    with pytest.raises(ValueError, match="buffer"):
        overlong_penalty(lengths, max_len=100, buffer=0)
