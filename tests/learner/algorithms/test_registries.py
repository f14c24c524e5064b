"""Every method is selectable by the name a config uses; typos fail with a suggestion."""

from __future__ import annotations

import math

import pytest
import torch

import learner.algorithms as algos
from rlinf_contracts.registry import Registry, UnknownNameError


def test_registered_names():
    assert algos.ADVANTAGES.names() == [
        "dr_grpo",
        "gae",
        "grpo",
        "reinforce_pp",
        "reinforce_pp_baseline",
        "rloo",
    ]
    assert algos.POLICY_LOSSES.names() == ["pg", "ppo"]
    assert algos.KL_ESTIMATORS.names() == ["k1", "k2", "k3", "low_var_kl"]
    assert algos.OFF_POLICY_LEARNERS.names() == ["crossq", "rlpd", "sac"]
    assert algos.AGG_MODES == (
        "token-mean",
        "seq-mean-token-sum",
        "seq-mean-token-mean",
        "seq-mean-token-sum-norm",
    )


def test_config_style_selection():
    cfg = {"adv": "dr_grpo", "loss": "ppo", "kl": "k3", "agg_mode": "seq-mean-token-sum-norm"}
    scores, mask = torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.ones(4, 2)
    adv = algos.compute_advantages(cfg["adv"], scores=scores, group_size=2, mask=mask)
    token_adv = algos.broadcast_to_tokens(adv, mask)
    logp = torch.zeros(4, 2)
    loss, _ = algos.POLICY_LOSSES.get(cfg["loss"])(
        logp, logp, token_adv, mask, agg_mode=cfg["agg_mode"], normalizer=4.0
    )
    # Dr.GRPO advantages [.5, -.5, 0, 0] on 2 tokens each, summed (= 0) / 4
    assert float(loss) == pytest.approx(0.0)
    kl = algos.kl_estimate(logp, logp - 1.0, cfg["kl"])
    # d = ref - logp = -1: k3 = exp(-1) - (-1) - 1 = exp(-1)
    torch.testing.assert_close(kl, torch.full((4, 2), math.exp(-1.0)))


def test_unknown_name_and_duplicates():
    with pytest.raises(UnknownNameError, match="did you mean 'ppo'"):
        algos.POLICY_LOSSES.get("ppoo")
    with pytest.raises(KeyError):
        algos.KL_ESTIMATORS.get("k4")
    reg: Registry[int] = Registry("thing")
    reg.add("a", 1)
    reg.add("a", 1)  # re-adding the same object is harmless
    with pytest.raises(ValueError, match="already registered"):
        reg.add("a", 2)
    assert "a" in reg and len(reg) == 1 and list(reg) == ["a"]
