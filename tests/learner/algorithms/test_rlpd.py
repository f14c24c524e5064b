"""RLPD: symmetric sampling, LayerNorm ensemble with random-2 minimum, UTD updates."""

from __future__ import annotations

import algo_toys
import pytest
import torch

from learner.algorithms.critics import CriticEnsemble
from learner.algorithms.rlpd import RLPDConfig, make_rlpd_learner, rlpd_update, symmetric_batch
from learner.algorithms.sac import OFF_POLICY_LEARNERS, SACConfig


def _data(n: int, tag: float) -> dict[str, torch.Tensor]:
    return {"obs": torch.full((n, 1), tag), "reward": torch.full((n,), tag)}


def test_symmetric_batch_is_half_offline_half_online():
    gen = torch.Generator().manual_seed(0)
    batch = symmetric_batch(_data(10, 1.0), _data(1000, 2.0), 64, generator=gen)
    assert batch["obs"].shape == (64, 1)
    assert int((batch["reward"] == 1.0).sum()) == 32 and int((batch["reward"] == 2.0).sum()) == 32
    # No online data yet: the whole batch comes from the demos.
    only_offline = symmetric_batch(_data(10, 1.0), {}, 16, generator=gen)
    assert (only_offline["reward"] == 1.0).all() and only_offline["reward"].shape == (16,)
    quarter = symmetric_batch(
        _data(10, 1.0), _data(10, 2.0), 16, offline_fraction=0.25, generator=gen
    )
    assert int((quarter["reward"] == 1.0).sum()) == 4
    with pytest.raises(ValueError, match="empty"):
        symmetric_batch({}, {}, 4)


def test_make_rlpd_learner_configuration():
    make = OFF_POLICY_LEARNERS.get("rlpd")
    learner = make(algo_toys.TanhGaussianActor(), 1, 1, RLPDConfig(hidden=(16,)))
    assert isinstance(learner.critic, CriticEnsemble) and learner.critic.n_critics == 10
    assert any(isinstance(m, torch.nn.LayerNorm) for m in learner.critic.modules())
    assert learner.cfg.critic_subset == 2 and learner.cfg.actor_q_reduce == "mean"
    # The caller's SACConfig is not mutated.
    sac_cfg = SACConfig()
    make_rlpd_learner(algo_toys.TanhGaussianActor(), 1, 1, RLPDConfig(hidden=(16,), sac=sac_cfg))
    assert sac_cfg.critic_subset is None


def test_rlpd_update_runs_utd_critic_steps_per_actor_step():
    actor = algo_toys.TanhGaussianActor(hidden=16)
    learner = make_rlpd_learner(actor, 1, 1, RLPDConfig(hidden=(16,)))
    gen = torch.Generator().manual_seed(0)
    state = algo_toys.reset(64, gen)
    action = torch.rand(64, 1, generator=gen) * 2 - 1
    nxt, reward = algo_toys.step(state, action)
    demos = {
        "obs": state,
        "action": action,
        "reward": reward,
        "next_obs": nxt,
        "done": torch.zeros(64),
    }
    sample = lambda: symmetric_batch(demos, {}, 32, generator=gen)  # noqa: E731
    metrics = rlpd_update(learner, sample, utd_ratio=5)
    critic_steps = learner.critic_opt.state[next(iter(learner.critic.parameters()))]["step"]
    actor_steps = learner.actor_opt.state[next(iter(learner.actor.parameters()))]["step"]
    assert int(critic_steps) == 5 and int(actor_steps) == 1
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    with pytest.raises(ValueError, match="utd_ratio"):
        rlpd_update(learner, lambda: demos, utd_ratio=0)


def test_layer_norm_parameters_are_per_member_and_vectorised():
    """Each of the 10 critics owns its LayerNorm scale / shift (one [E, 1, W] tensor each,
    still one batched pass): changing member 3's norm changes only member 3's Q."""
    from learner.algorithms.critics import EnsembleLayerNorm

    learner = make_rlpd_learner(
        algo_toys.TanhGaussianActor(hidden=8), 1, 1, RLPDConfig(hidden=(16, 16))
    )
    norms = [m for m in learner.critic.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 2 and all(isinstance(m, EnsembleLayerNorm) for m in norms)
    assert all(m.weight.shape == m.bias.shape == (10, 1, 16) for m in norms)
    obs, act = torch.randn(5, 1), torch.randn(5, 1)
    before = learner.critic(obs, act).detach()
    with torch.no_grad():
        norms[0].bias[3].add_(1.0)
    after = learner.critic(obs, act).detach()
    changed = (after - before).abs().amax(dim=1) > 0
    assert changed.tolist() == [j == 3 for j in range(10)]


def test_target_entropy_is_minus_half_action_dim():
    learner = make_rlpd_learner(
        algo_toys.TanhGaussianActor(hidden=8, act_dim=4), 1, 4, RLPDConfig(hidden=(8,))
    )
    assert learner.target_entropy == -2.0
    explicit = RLPDConfig(hidden=(8,), sac=SACConfig(target_entropy=-1.0))
    assert (
        make_rlpd_learner(
            algo_toys.TanhGaussianActor(hidden=8, act_dim=4), 1, 4, explicit
        ).target_entropy
        == -1.0
    )
