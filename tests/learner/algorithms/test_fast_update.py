"""The fast SAC update path computes what the reference formulation computes.

The reference is the update written plainly: the log-density recomputed from the pre-squash
sample, the for-loop Adam, one Polyak ``lerp_`` per tensor, and in pixel runs the actor step
encoding the observation separately for the actor and the critic. On a fixed batch and seed
the fast path must give the same losses, gradients and parameters to float tolerance.
"""

from __future__ import annotations

import copy

import torch

from learner.algorithms.critics import CriticEnsemble, soft_update
from learner.algorithms.distributions import TanhGaussian
from learner.algorithms.sac import (
    SACLearner,
    sac_actor_loss,
    sac_critic_loss,
    sac_critic_target,
    temperature_loss,
)
from learner.models.offpolicy import SquashedGaussianPolicy
from learner.models.policy import PolicySpec
from learner.offpolicy.config import OffPolicyConfig
from learner.offpolicy.nets import ActorView, build
from rlinf_contracts.config import from_dict

B, OBS, ACT = 32, 6, 2


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return {
        "obs": torch.randn(B, OBS, generator=g),
        "next_obs": torch.randn(B, OBS, generator=g),
        "action": torch.rand(B, ACT, generator=g) * 2 - 1,
        "reward": torch.randn(B, generator=g),
        "done": (torch.rand(B, generator=g) < 0.2).float(),
    }


def _reference_rsample(dist: TanhGaussian) -> tuple[torch.Tensor, torch.Tensor]:
    u = dist.mean + dist.std * torch.randn_like(dist.mean)
    return torch.tanh(u), dist._log_prob_u(u)


def _reference_update(learner: SACLearner, batch: dict, opts: dict) -> dict[str, float]:
    """One critic + actor + temperature step written plainly (what the fast path replaces)."""
    cfg = learner.cfg
    with torch.no_grad():
        next_a, next_logp = _reference_rsample(learner.actor(batch["next_obs"]))
        next_q = learner.target_critic(batch["next_obs"], next_a)
        y = sac_critic_target(
            batch["reward"], batch["done"], next_q, next_logp, learner.temperature.alpha, cfg.gamma
        )
    q = learner.critic(batch["obs"], batch["action"])
    c_loss = sac_critic_loss(q, y)
    opts["critic"].zero_grad()
    c_loss.backward()
    opts["critic"].step()
    with torch.no_grad():
        for t, s in zip(learner.target_critic.parameters(), learner.critic.parameters()):
            t.lerp_(s, cfg.tau)
    action, logp = _reference_rsample(learner.actor(batch["obs"]))
    learner.critic.requires_grad_(False)
    q_pi = learner.critic(batch["obs"], action)
    learner.critic.requires_grad_(True)
    a_loss = sac_actor_loss(logp, q_pi, learner.temperature.alpha)
    opts["actor"].zero_grad()
    a_loss.backward()
    opts["actor"].step()
    t_loss = temperature_loss(learner.temperature.log_alpha, logp, learner.target_entropy)
    opts["alpha"].zero_grad()
    t_loss.backward()
    opts["alpha"].step()
    return {"critic_loss": float(c_loss.detach()), "actor_loss": float(a_loss.detach())}


def _learner() -> SACLearner:
    spec = PolicySpec(state_dim=OBS, action_dim=ACT, chunk=1, cameras={})
    actor = ActorView(SquashedGaussianPolicy(spec, (16, 16)))
    return SACLearner(actor, CriticEnsemble(OBS, ACT, 2, (16, 16)), ACT)


def _plain_adams(learner: SACLearner) -> dict[str, torch.optim.Optimizer]:
    def plain(params, lr, betas=(0.9, 0.999)):
        return torch.optim.Adam(params, lr=lr, betas=betas, foreach=False)

    c = learner.cfg
    return {
        "actor": plain(learner.actor.parameters(), c.actor_lr),
        "critic": plain(learner.critic.parameters(), c.critic_lr),
        "alpha": plain(learner.temperature.parameters(), c.alpha_lr),
    }


def test_rsample_log_density_equals_the_reference_formula():
    mean = torch.randn(B, ACT, requires_grad=True)
    log_std = (0.3 * torch.randn(B, ACT)).requires_grad_(True)
    torch.manual_seed(5)
    a_fast, logp_fast = TanhGaussian(mean, log_std).rsample()
    g_fast = torch.autograd.grad((logp_fast - a_fast.sum(-1)).sum(), [mean, log_std])
    torch.manual_seed(5)
    a_ref, logp_ref = _reference_rsample(TanhGaussian(mean, log_std))
    g_ref = torch.autograd.grad((logp_ref - a_ref.sum(-1)).sum(), [mean, log_std])
    torch.testing.assert_close(a_fast, a_ref)
    torch.testing.assert_close(logp_fast, logp_ref, rtol=1e-5, atol=1e-5)
    for f, r in zip(g_fast, g_ref, strict=True):
        torch.testing.assert_close(f, r, rtol=1e-5, atol=1e-5)


def test_fast_update_matches_the_reference_losses_gradients_and_parameters():
    batch = _batch()
    fast = _learner()
    ref = copy.deepcopy(fast)
    opts = _plain_adams(ref)
    for step in range(3):
        torch.manual_seed(100 + step)
        m_fast = fast.update(batch)
        torch.manual_seed(100 + step)
        m_ref = _reference_update(ref, batch, opts)
        for key in ("critic_loss", "actor_loss"):
            assert abs(m_fast[key] - m_ref[key]) <= 1e-5 * max(1.0, abs(m_ref[key])), key
        for name in ("actor", "critic"):  # the last step's gradients are still on the tensors
            for pf, pr in zip(
                getattr(fast, name).parameters(), getattr(ref, name).parameters(), strict=True
            ):
                torch.testing.assert_close(pf.grad, pr.grad, rtol=1e-4, atol=1e-6)
    for part in ("actor", "critic", "target_critic", "temperature"):
        for pf, pr in zip(
            getattr(fast, part).parameters(), getattr(ref, part).parameters(), strict=True
        ):
            torch.testing.assert_close(pf, pr, rtol=1e-5, atol=1e-6)


def test_soft_update_for_each_equals_one_lerp_per_tensor():
    src, tgt = CriticEnsemble(OBS, ACT, 3, (8,)), CriticEnsemble(OBS, ACT, 3, (8,))
    want = [t.detach().lerp(s.detach(), 0.1) for t, s in zip(tgt.parameters(), src.parameters())]
    soft_update(tgt, src, 0.1)
    for got, w in zip(tgt.parameters(), want, strict=True):
        torch.testing.assert_close(got.detach(), w)


def test_pixel_actor_step_encoding_once_matches_encoding_twice():
    cfg = from_dict(
        OffPolicyConfig,
        {
            "env": {"obs_mode": "rgb"},
            "model": {
                "hidden": [16, 16],
                "critic_hidden": [16, 16],
                "use_images": True,
                "cnn_channels": [4, 4],
                "image_feat_dim": 8,
            },
        },
    )
    spec = PolicySpec(state_dim=3, action_dim=ACT, chunk=1, cameras={"cam": (16, 16)})
    _, fast = build(cfg, spec)
    ref = copy.deepcopy(fast)
    ref.features = lambda obs: obs  # the reference: actor and critic each run the encoder
    g = torch.Generator().manual_seed(1)
    obs = {
        "state": torch.randn(B, 3, generator=g),
        "images": {"cam": torch.randint(0, 255, (B, 16, 16, 3), generator=g, dtype=torch.uint8)},
    }
    torch.manual_seed(7)
    m_fast = fast.update_actor({"obs": obs})
    torch.manual_seed(7)
    m_ref = ref.update_actor({"obs": obs})
    assert abs(m_fast["actor_loss"] - m_ref["actor_loss"]) <= 1e-6
    for pf, pr in zip(fast.actor.parameters(), ref.actor.parameters(), strict=True):
        torch.testing.assert_close(pf.grad, pr.grad)
    # the encoder gets no gradient from the actor step either way
    assert all(p.grad is None for p in fast.critic.encoder.parameters())
