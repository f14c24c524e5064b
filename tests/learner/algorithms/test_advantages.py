"""Advantage estimators against hand-computed values and their defining properties."""

from __future__ import annotations

import math

import pytest
import torch

from learner.algorithms.advantages import (
    ADVANTAGES,
    broadcast_to_tokens,
    compute_advantages,
    gae,
    grpo_advantages,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
    reinforce_pp_returns,
    rloo_advantages,
    whiten,
)
from rlinf_contracts.registry import UnknownNameError

T = torch.tensor


def test_gae_hand_computed():
    # t=2: A=2; t=1: delta=-1, A=-1+0.9*0.8*2=0.44; t=0: delta=1+0.9*1-0.5=1.4, A=1.4+0.72*0.44
    adv, ret = gae(T([[1.0, 0.0, 2.0]]), T([[0.5, 1.0, 0.0]]), T([[1.0, 1.0, 1.0]]), 0.9, 0.8)
    torch.testing.assert_close(adv, T([[1.7168, 0.44, 2.0]]))
    torch.testing.assert_close(ret, T([[2.2168, 1.44, 2.0]]))


def test_gae_masked_positions_do_not_change_result():
    mask = T([[1.0, 0.0, 1.0, 1.0, 0.0]])
    adv, ret = gae(
        T([[1.0, 99.0, 0.0, 2.0, 77.0]]), T([[0.5, -50.0, 1.0, 0.0, 33.0]]), mask, 0.9, 0.8
    )
    torch.testing.assert_close(adv, T([[1.7168, 0.0, 0.44, 2.0, 0.0]]))
    torch.testing.assert_close(ret, T([[2.2168, 0.0, 1.44, 2.0, 0.0]]))
    # Any other garbage in padding gives the same answer.
    adv2, _ = gae(T([[1.0, -3.0, 0.0, 2.0, 1e6]]), T([[0.5, 1e3, 1.0, 0.0, -1e6]]), mask, 0.9, 0.8)
    torch.testing.assert_close(adv2, adv)


def test_gae_lambda1_gamma1_is_returns_minus_values():
    gen = torch.Generator().manual_seed(1)
    rewards, values = torch.randn(4, 6, generator=gen), torch.randn(4, 6, generator=gen)
    boot = torch.randn(4, generator=gen)
    adv, ret = gae(rewards, values, torch.ones(4, 6), 1.0, 1.0, bootstrap_value=boot)
    mc = rewards.flip(1).cumsum(1).flip(1) + boot.unsqueeze(1)
    torch.testing.assert_close(adv, mc - values)
    torch.testing.assert_close(ret, mc)


def test_gae_lambda0_is_td_error():
    gen = torch.Generator().manual_seed(2)
    rewards, values = torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen)
    boot = torch.randn(3, generator=gen)
    adv, _ = gae(rewards, values, torch.ones(3, 5), 0.9, 0.0, bootstrap_value=boot)
    next_v = torch.cat([values[:, 1:], boot.unsqueeze(1)], dim=1)
    torch.testing.assert_close(adv, rewards + 0.9 * next_v - values)


def test_gae_dones_cut_bootstrapping_and_restart():
    # Episode 1 = steps 0-1 (done at 1), episode 2 = steps 2-3 bootstrapped with 10.
    adv, _ = gae(
        T([[1.0, 1.0, 1.0, 1.0]]),
        T([[1.0, 2.0, 3.0, 4.0]]),
        torch.ones(1, 4),
        1.0,
        1.0,
        bootstrap_value=T([10.0]),
        dones=T([[0.0, 1.0, 0.0, 0.0]]),
    )
    torch.testing.assert_close(adv, T([[1.0, -1.0, 9.0, 7.0]]))


def test_grpo_hand_values_and_all_equal_group_is_exactly_zero():
    scores = T([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0, 0.1, 0.1, 0.1, 0.1])
    adv = grpo_advantages(scores, group_size=4)
    # group 1: mean 0.5, unbiased std sqrt(1/3) -> +-0.5 * sqrt(3) = +-0.8660
    expected = T([1.0, -1.0, -1.0, 1.0]) * 0.5 * math.sqrt(3.0)
    torch.testing.assert_close(adv[:4], expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(adv[4:], torch.zeros(8))
    assert not torch.isnan(adv).any()


def test_grpo_group_sums_to_zero_and_unit_std():
    gen = torch.Generator().manual_seed(3)
    scores = torch.randn(5 * 8, generator=gen) * 3.0 + 1.0
    adv = grpo_advantages(scores, 8).reshape(5, 8)
    torch.testing.assert_close(adv.sum(1), torch.zeros(5), atol=1e-5, rtol=0)
    torch.testing.assert_close(adv.std(1), torch.ones(5), atol=1e-4, rtol=0)


def test_dr_grpo_is_score_minus_mean():
    scores = T([1.0, 0.0, 0.0, 0.0, 3.0, 5.0])
    adv = ADVANTAGES.get("dr_grpo")(scores, 3)
    torch.testing.assert_close(adv, T([2 / 3, -1 / 3, -1 / 3, -8 / 3, 1 / 3, 7 / 3]))
    torch.testing.assert_close(grpo_advantages(scores, 3, normalize_std=False), adv)


def test_rloo_leave_one_out():
    # baselines: (2+6)/2=4, (1+6)/2=3.5, (1+2)/2=1.5
    torch.testing.assert_close(rloo_advantages(T([1.0, 2.0, 6.0]), 3), T([-3.0, -1.5, 4.5]))
    with pytest.raises(ValueError, match="group_size >= 2"):
        rloo_advantages(T([1.0, 2.0]), 1)


def test_group_size_must_divide():
    with pytest.raises(ValueError, match="divide"):
        grpo_advantages(torch.zeros(5), 2)


def test_whiten_masked():
    x, m = T([[1.0, 2.0, 3.0, 100.0]]), T([[1.0, 1.0, 1.0, 0.0]])
    # mean 2, unbiased var (1 + 0 + 1) / 2 = 1
    torch.testing.assert_close(whiten(x, m), T([[-1.0, 0.0, 1.0, 0.0]]))
    torch.testing.assert_close(whiten(x, m, shift_mean=False), T([[1.0, 2.0, 3.0, 0.0]]))


def test_reinforce_pp_returns_discounted_and_masked():
    ret = reinforce_pp_returns(T([[0.0, 0.5, 1.0, 9.0]]), T([[1.0, 1.0, 1.0, 0.0]]), gamma=0.5)
    torch.testing.assert_close(ret, T([[0.5, 1.0, 1.0, 0.0]]))


def test_reinforce_pp_is_whitened_return():
    rewards = T([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]])
    mask = T([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    # returns (gamma 1): [1, 1, 1], [2, 2, -]; mean 1.4, unbiased var (3*0.16 + 2*0.36)/4 = 0.3
    expected = (T([[1.0, 1.0, 1.0], [2.0, 2.0, 1.4]]) - 1.4) / math.sqrt(0.3) * mask
    adv = reinforce_pp_advantages(rewards, mask)
    torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-5)


def test_reinforce_pp_baseline_hand_computed():
    scores = T([1.0, 0.0, 3.0, 1.0])  # two groups of 2 -> centred [0.5, -0.5, 1, -1]
    mask = T([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]]).float()
    adv = reinforce_pp_baseline_advantages(scores, mask, group_size=2)
    # token values .5,.5 | -.5 x3 | 1 | -1,-1: mean -0.1875, sum sq dev 3.96875, 8 tokens
    std = math.sqrt(3.96875 / 7)
    tokens = T([[0.5, 0.5, 0.0], [-0.5, -0.5, -0.5], [1.0, 0.0, 0.0], [-1.0, -1.0, 0.0]])
    expected = (tokens + 0.1875) / std
    torch.testing.assert_close(adv, expected * mask, rtol=1e-5, atol=1e-5)


def test_broadcast_to_tokens():
    out = broadcast_to_tokens(T([2.0, -1.0]), T([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    torch.testing.assert_close(out, T([[2.0, 2.0, 0.0], [-1.0, 0.0, 0.0]]))


def test_registry_names_and_compute_by_name():
    assert ADVANTAGES.names() == sorted(
        ["gae", "grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline"]
    )
    inputs = dict(scores=T([1.0, 0.0, 2.0, 2.0]), group_size=2, mask=torch.ones(4, 3), gamma=1.0)
    adv = compute_advantages("grpo", **inputs)  # extra inputs are ignored
    torch.testing.assert_close(adv, T([0.7071, -0.7071, 0.0, 0.0]), rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="values"):
        compute_advantages(
            "gae", rewards=torch.zeros(1, 2), mask=torch.ones(1, 2), gamma=1.0, lam=1.0
        )
    with pytest.raises(UnknownNameError, match="did you mean 'grpo'") as err:
        compute_advantages("grpoo", **inputs)
    assert isinstance(err.value, KeyError) and "rloo" in str(err.value)


def test_estimator_specs_carry_what_runners_need():
    flags = {
        n: (ADVANTAGES.get(n).needs_critic, ADVANTAGES.get(n).grouped, ADVANTAGES.get(n).signal)
        for n in ADVANTAGES.names()
    }
    assert flags == {
        "gae": (True, False, "value"),
        "grpo": (False, True, "outcome"),
        "dr_grpo": (False, True, "outcome"),
        "rloo": (False, True, "outcome"),
        "reinforce_pp": (False, False, "token"),
        "reinforce_pp_baseline": (False, True, "token"),
    }
    spec = ADVANTAGES.get("grpo")
    scores = T([1.0, 0.0, 2.0, 2.0])
    torch.testing.assert_close(
        compute_advantages(spec, scores=scores, group_size=2),
        compute_advantages("grpo", scores=scores, group_size=2),
    )


def test_check_groups_accepts_contiguous_blocks_and_rejects_interleaving():
    """The GRPO trainer reshapes ``[N] -> [N/n, n]``: a backend returning samples sample-major
    (p0, p1, p0, p1) instead of prompt-major would silently mix prompts into one group."""
    from learner.algorithms.advantages import check_groups
    from learner.llm.rollout.base import RolloutBatch

    check_groups([4, 4, 4, 9, 9, 9], 3)
    check_groups([], 3)

    def part(ids: list[int]) -> RolloutBatch:
        k = len(ids)
        return RolloutBatch([[1]] * k, [[2]] * k, [[0.0]] * k, [""] * k, ["stop"] * k, ids)

    # Micro-batches of whole groups may arrive in any order: still valid.
    check_groups(RolloutBatch.concat([part([2, 2]), part([0, 0, 1, 1])]).prompt_index, 2)
    scores = T([1.0, 0.0, 5.0, 7.0])
    interleaved = [0, 1, 0, 1]
    with pytest.raises(ValueError, match=r"samples 0\.\.1 should all answer one prompt"):
        check_groups(interleaved, 2)
    # What the check prevents: the same rows grouped contiguously give other advantages than
    # grouping by prompt (prompt 0 = {1, 5}, prompt 1 = {0, 7}).
    by_prompt = T([-2.0, -3.5, 2.0, 3.5])
    assert not torch.allclose(compute_advantages("dr_grpo", scores=scores, group_size=2), by_prompt)
    with pytest.raises(ValueError, match="fills two groups"):
        check_groups([3, 3, 5, 5, 3, 3], 2)
    with pytest.raises(ValueError, match="groups of 4"):
        check_groups([1, 1, 1, 1, 2, 2], 4)
