"""CrossQ as in the paper: no target network, batch renormalisation, joint train-mode pass,
policy delay 3, Adam beta1 0.5."""

from __future__ import annotations

import algo_toys
import torch

from learner.algorithms.batch_renorm import EnsembleBatchRenorm
from learner.algorithms.crossq import CrossQConfig, make_crossq_learner
from learner.algorithms.sac import OFF_POLICY_LEARNERS, SACConfig


def _batch(n: int = 16) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    obs = algo_toys.reset(n, gen)
    action = torch.rand(n, 1, generator=gen) * 2 - 1
    nxt, reward = algo_toys.step(obs, action)
    return {"obs": obs, "action": action, "reward": reward, "next_obs": nxt, "done": torch.zeros(n)}


def _learner(cfg: CrossQConfig | None = None):
    return OFF_POLICY_LEARNERS.get("crossq")(
        algo_toys.TanhGaussianActor(hidden=8), 1, 1, cfg, hidden=(8,)
    )


def test_no_target_critic_built_or_checkpointed():
    learner = _learner()
    assert learner.target_critic is None
    state = learner.state_dict()
    assert "target_critic" not in state and {"actor", "critic", "critic_opt"} <= state.keys()
    learner.update(_batch())
    other = _learner()
    other.load_state_dict(learner.state_dict())
    obs, act = _batch()["obs"], _batch()["action"]
    learner.critic.eval(), other.critic.eval()
    torch.testing.assert_close(other.critic(obs, act), learner.critic(obs, act))


def test_paper_defaults_batch_renorm_and_adam_beta1():
    learner = _learner()
    cfg = learner.cfg
    assert isinstance(cfg, CrossQConfig)
    assert (cfg.policy_delay, cfg.adam_beta1, cfg.critic_lr, cfg.actor_lr) == (3, 0.5, 1e-3, 1e-3)
    norms = [m for m in learner.critic.modules() if isinstance(m, EnsembleBatchRenorm)]
    assert len(norms) == 2  # input + the hidden layer
    assert not any(
        isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in learner.critic.modules()
    )
    for opt in (learner.critic_opt, learner.actor_opt):
        assert opt.param_groups[0]["betas"][0] == 0.5


def test_policy_delay_three_critic_steps_per_actor_step():
    learner = _learner()
    batch = _batch()
    for _ in range(6):
        learner.update(batch)
    critic_steps = learner.critic_opt.state[next(iter(learner.critic.parameters()))]["step"]
    actor_steps = learner.actor_opt.state[next(iter(learner.actor.parameters()))]["step"]
    assert (int(critic_steps), int(actor_steps)) == (6, 2)


def test_critic_step_is_one_joint_train_mode_pass():
    """One critic forward per update, in train mode, on the 2B rows of (s, a) and (s', a')."""
    learner = _learner(CrossQConfig(renorm_warmup_steps=0))
    seen: list[tuple[bool, int]] = []
    first_norm = next(m for m in learner.critic.modules() if isinstance(m, EnsembleBatchRenorm))
    first_norm.register_forward_hook(lambda m, inp, out: seen.append((m.training, inp[0].shape[1])))
    learner.update_critic(_batch(16))
    assert seen == [(True, 32)]
    assert int(first_norm.steps) == 1


def test_plain_sac_config_is_used_as_given():
    learner = make_crossq_learner(
        algo_toys.TanhGaussianActor(hidden=8), 1, 1, SACConfig(), hidden=(8,)
    )
    assert learner.cfg.policy_delay == 1 and learner.target_critic is None
