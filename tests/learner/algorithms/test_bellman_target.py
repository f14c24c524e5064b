"""The critic step bootstraps from the *target* critics, never from the online ones.

The target critics are set to constant outputs (last layer: zero weights, chosen biases),
the online critic is left random; the loss ``update_critic`` reports is then checked against
``y = r + gamma (1 - d) Q'``. A learner that bootstrapped from the online critic (or from the
online critic's minimum over all members) gives another loss and fails here.
"""

from __future__ import annotations

import algo_toys
import pytest
import torch

from learner.algorithms.rlpd import RLPDConfig, make_rlpd_learner
from learner.algorithms.sac import SACConfig, make_sac_learner, sac_critic_loss

GAMMA = 0.5


def _batch() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    obs = algo_toys.reset(8, gen)
    action = torch.rand(8, 1, generator=gen) * 2 - 1
    nxt, reward = algo_toys.step(obs, action)
    done = torch.tensor([0.0, 1.0] * 4)
    return {"obs": obs, "action": action, "reward": reward, "next_obs": nxt, "done": done}


def _constant_target(learner, values: list[float]) -> None:
    last = learner.target_critic.net[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor(values).view(-1, 1, 1))


def _loss_for(learner, batch, bootstrap: torch.Tensor) -> float:
    y = batch["reward"] + GAMMA * (1 - batch["done"]) * bootstrap
    with torch.no_grad():
        return float(sac_critic_loss(learner.critic(batch["obs"], batch["action"]), y))


def test_sac_bootstraps_from_the_target_critics():
    cfg = SACConfig(gamma=GAMMA, backup_entropy=False)
    learner = make_sac_learner(algo_toys.TanhGaussianActor(hidden=8), 1, 1, cfg, hidden=(8,))
    _constant_target(learner, [4.0, 7.0])  # min over the pair = 4
    batch = _batch()
    torch.testing.assert_close(
        learner.bellman_target(batch), batch["reward"] + GAMMA * (1 - batch["done"]) * 4.0
    )
    expected = _loss_for(learner, batch, torch.tensor(4.0))
    metrics = learner.update_critic(batch)
    assert metrics["critic_loss"] == pytest.approx(expected, rel=1e-5)


def test_rlpd_bootstraps_from_a_random_pair_of_target_critics():
    """Target members output 10, 11, ..., 19: the bootstrap is the minimum of a random pair,
    so it lies in 10..18 and is not always 10 (the minimum over all ten)."""
    cfg = RLPDConfig(hidden=(8,), sac=SACConfig(gamma=GAMMA, backup_entropy=False))
    learner = make_rlpd_learner(algo_toys.TanhGaussianActor(hidden=8), 1, 1, cfg)
    _constant_target(learner, [10.0 + j for j in range(10)])
    batch = _batch()
    live = batch["done"] == 0
    seen = set()
    for _ in range(20):
        y = learner.bellman_target(batch)
        boot = (y - batch["reward"])[live] / GAMMA
        assert torch.allclose(boot, boot[0].expand_as(boot))  # one pair per batch
        seen.add(round(float(boot[0])))
        torch.testing.assert_close(y[~live], batch["reward"][~live])
    assert seen <= set(range(10, 19)) and seen != {10}
    # and the critic step uses such a target: its loss matches one of the possible pairs
    candidates = [_loss_for(learner, batch, torch.tensor(float(b))) for b in range(10, 19)]
    metrics = learner.update_critic(batch)
    assert min(abs(metrics["critic_loss"] - c) / c for c in candidates) < 1e-5
