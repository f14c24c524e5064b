"""IQL: expectile asymmetry and minimiser, Q target, AWR weights, and an offline check."""

from __future__ import annotations

import algo_toys
import pytest
import torch

from learner.algorithms.critics import CriticEnsemble
from learner.algorithms.iql import (
    awr_actor_loss,
    awr_weights,
    expectile_loss,
    iql_q_loss,
    iql_q_target,
    iql_value_loss,
)

T = torch.tensor


def test_expectile_loss_is_asymmetric():
    loss = expectile_loss(T([2.0, -2.0, 0.0]), tau=0.8)
    torch.testing.assert_close(loss, T([0.8 * 4.0, 0.2 * 4.0, 0.0]))
    # tau = 0.5 is half the squared error, symmetric.
    torch.testing.assert_close(expectile_loss(T([3.0, -3.0]), 0.5), T([4.5, 4.5]))
    with pytest.raises(ValueError, match="tau"):
        expectile_loss(T([1.0]), 1.0)


def test_value_fits_the_upper_expectile():
    """Q samples {0, 1}: minimiser of 0.1 v^2 + 0.9 (1 - v)^2 is v = 0.9 (the mean would be 0.5)."""
    v = torch.zeros(1, requires_grad=True)
    q = T([0.0, 1.0])
    opt = torch.optim.SGD([v], lr=0.5)
    for _ in range(200):
        opt.zero_grad()
        iql_value_loss(q, v.expand(2), tau=0.9).backward()
        opt.step()
    assert float(v.detach()) == pytest.approx(0.9, abs=1e-4)
    # ensemble input: u = min_j Q_j - V
    ens = iql_value_loss(T([[1.0, 0.0], [3.0, -1.0]]), T([0.0, 0.0]), 0.9)  # u = [1, -1]
    assert float(ens) == pytest.approx((0.9 + 0.1) / 2)


def test_q_target_q_loss_and_awr_weights():
    y = iql_q_target(T([1.0, 1.0]), T([0.0, 1.0]), T([2.0, 2.0]), gamma=0.5)
    torch.testing.assert_close(y, T([2.0, 1.0]))
    assert float(iql_q_loss(T([[2.0, 3.0]]), y)) == pytest.approx(0.5 * (0 + 4) / 2)
    w = awr_weights(T([1.0, 10.0, -1.0]), T([0.0, 0.0, 0.0]), beta=1.0)
    torch.testing.assert_close(w, T([2.718281828, 100.0, 0.367879441]))
    logp = T([-1.0, -2.0, -3.0], requires_grad=True)
    loss = awr_actor_loss(logp, w)
    (grad,) = torch.autograd.grad(loss, logp)
    torch.testing.assert_close(grad, -w / 3)


def test_iql_offline_beats_behaviour_policy():
    """Data: 50% expert actions, 50% the exact opposite (away from the goal). Behaviour
    cloning of that mix (beta = 0) averages them to ~0 and scores about -7.4; IQL's advantage
    weights pick the good half (about -2.0 over seeds): threshold -3.0 (expert -1.1)."""
    gen = torch.Generator().manual_seed(0)
    obs, act, rew, nxt = [], [], [], []
    state = algo_toys.reset(512, gen)
    for _ in range(algo_toys.HORIZON):
        use_expert = torch.rand(state.shape, generator=gen) < 0.5
        expert = algo_toys.expert_action(state)
        a = torch.where(use_expert, expert, -expert)
        s2, r = algo_toys.step(state, a)
        obs.append(state), act.append(a), rew.append(r), nxt.append(s2)
        state = s2
    data = {
        "obs": torch.cat(obs),
        "action": torch.cat(act),
        "reward": torch.cat(rew),
        "next_obs": torch.cat(nxt),
    }
    q_net, v_net = CriticEnsemble(1, 1, 2, (64, 64)), CriticEnsemble(1, 0, 1, (64, 64))
    actor = algo_toys.TanhGaussianActor()
    opt = torch.optim.Adam([*q_net.parameters(), *v_net.parameters(), *actor.parameters()], lr=1e-3)
    done = torch.zeros(256)
    for _ in range(500):
        idx = torch.randint(data["obs"].shape[0], (256,), generator=gen)
        b = {k: v[idx] for k, v in data.items()}
        q = q_net(b["obs"], b["action"])
        v = v_net(b["obs"]).squeeze(0)
        with torch.no_grad():
            target = iql_q_target(b["reward"], done, v_net(b["next_obs"]).squeeze(0), gamma=0.9)
        w = awr_weights(q.detach(), v.detach(), beta=3.0)
        logp = actor(b["obs"]).log_prob(b["action"])
        loss = iql_q_loss(q, target) + iql_value_loss(q.detach(), v, 0.8) + awr_actor_loss(logp, w)
        opt.zero_grad()
        loss.backward()
        opt.step()
    ret = algo_toys.evaluate(lambda s: actor(s).mode())
    assert ret > -3.0, ret


def test_value_loss_sends_no_gradient_into_q():
    """The expectile loss trains V only: Q's parameters get no gradient from it, even when
    the caller passes Q's output without detaching it."""
    q_net, v_net = CriticEnsemble(2, 1, 2, (8,)), CriticEnsemble(2, 0, 1, (8,))
    obs, act = torch.randn(16, 2), torch.randn(16, 1)
    loss = iql_value_loss(q_net(obs, act), v_net(obs).squeeze(0), tau=0.8)
    loss.backward()
    assert all(p.grad is None for p in q_net.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in v_net.parameters())
