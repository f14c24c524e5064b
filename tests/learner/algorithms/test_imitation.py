"""BC / SFT losses, DAgger aggregation at learner-visited states, HG-DAgger weighting."""

from __future__ import annotations

import math

import algo_toys
import pytest
import torch

from learner.algorithms.imitation import (
    DaggerBuffer,
    aggregate_dagger,
    bc_loss,
    dagger_mix,
    intervention_weights,
    nll_loss,
    sft_loss,
)

T = torch.tensor


def test_bc_and_nll_losses():
    pred, target = T([[0.0, 0.0], [1.0, 1.0]]), T([[1.0, 1.0], [1.0, 3.0]])
    assert float(bc_loss(pred, target)) == pytest.approx((1.0 + 2.0) / 2)  # per-sample MSE 1, 2
    assert float(bc_loss(pred, target, weights=T([3.0, 1.0]))) == pytest.approx((3 * 1.0 + 2.0) / 4)
    assert float(nll_loss(T([-1.0, -3.0]), weights=T([1.0, 0.0]))) == pytest.approx(1.0)


def test_sft_loss_token_cross_entropy_with_mask():
    logits = torch.zeros(2, 3, 4)
    logits[0, 0, 2] = math.log(3.0)  # p(label 2) = 3 / 6
    labels = T([[2, 1, -100], [0, -100, -100]])  # -100 at padding must not crash
    mask = T([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    expected = (math.log(2.0) + math.log(4.0) + math.log(4.0)) / 3
    assert float(sft_loss(logits, labels, mask)) == pytest.approx(expected, rel=1e-6)
    seq = (((math.log(2.0) + math.log(4.0)) / 2) + math.log(4.0)) / 2
    per_seq = float(sft_loss(logits, labels, mask, "seq-mean-token-mean"))
    assert per_seq == pytest.approx(seq, rel=1e-6)


def test_dagger_aggregation_labels_learner_visited_states_with_expert_actions():
    gen = torch.Generator().manual_seed(0)
    learner_policy = lambda s: torch.full_like(s, 0.5)  # noqa: E731  (a bad learner)
    buffer = DaggerBuffer()
    demo_s = algo_toys.reset(8, gen)
    buffer.add_demos(demo_s, algo_toys.expert_action(demo_s))
    state, visited = algo_toys.reset(4, gen), []
    for _ in range(3):  # roll out the *learner*, record where it goes
        visited.append(state)
        state, _ = algo_toys.step(state, learner_policy(state))
    visited_s = torch.cat(visited)
    buffer.add_relabelled(visited_s, algo_toys.expert_action(visited_s))
    data = buffer.tensors()
    assert len(buffer) == 8 + 12
    relabel = data["source"] == DaggerBuffer.RELABEL
    assert torch.equal(data["obs"][relabel], visited_s)
    torch.testing.assert_close(data["action"][relabel], algo_toys.expert_action(visited_s))
    assert not torch.allclose(data["action"][relabel], learner_policy(visited_s))
    before = {k: data[k][~relabel] for k in ("obs", "action", "weight")}
    functional = aggregate_dagger(before, visited_s, algo_toys.expert_action(visited_s))
    torch.testing.assert_close(functional["action"], data["action"])
    assert buffer.sample(5, gen)["obs"].shape == (5, 1)


def test_hg_dagger_interventions_weighted():
    intervened = T([0, 1, 1, 1, 0, 1, 1]).bool()
    w = intervention_weights(intervened, intervention_weight=1.0, onset_weight=3.0, onset_steps=2)
    torch.testing.assert_close(w, T([0.0, 3.0, 3.0, 1.0, 0.0, 3.0, 3.0]))
    buffer = DaggerBuffer()
    obs = torch.arange(7.0).unsqueeze(1)
    human = -obs
    buffer.add_interventions(obs, human, intervened, weight=2.0)
    data = buffer.tensors()
    # only the human-controlled steps are kept
    assert data["obs"].squeeze(1).tolist() == [1.0, 2.0, 3.0, 5.0, 6.0]
    torch.testing.assert_close(data["action"], -data["obs"])
    assert data["weight"].tolist() == [2.0] * 5 and (data["source"] == DaggerBuffer.HUMAN).all()
    with pytest.raises(ValueError, match="empty"):
        DaggerBuffer().tensors()


def test_dagger_mix_beta():
    gen = torch.Generator().manual_seed(0)
    learner_a, expert_a = torch.zeros(10_000, 2), torch.ones(10_000, 2)
    mixed, used = dagger_mix(learner_a, expert_a, beta=0.3, generator=gen)
    assert float(used.float().mean()) == pytest.approx(0.3, abs=0.02)
    assert torch.equal(mixed[used], expert_a[used]) and torch.equal(mixed[~used], learner_a[~used])
