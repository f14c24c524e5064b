"""Networks of an off-policy run: the servable actor, the critic ensemble, the SAC-family learner.

The learner classes are those of :mod:`learner.algorithms` (``OFF_POLICY_LEARNERS``: ``sac``,
``rlpd``, ``crossq``); this module only adapts them to observations:

* State runs pass the state tensor straight through (the encoder has no parameters), so the
  registered factories are used exactly as their tests use them.
* Image runs (DrQ): the critic is :class:`EncodedCritic` -- the policy's pixel encoder followed
  by the ensemble -- so the critic loss (and only it) trains the encoder, and the target critic
  holds a Polyak-averaged copy of it. :class:`ActorView` reads encoder features under
  ``no_grad``: the actor loss never reaches the encoder, and the actor optimiser holds the
  actor's own parameters only.

The replay's n-step ``discount`` (``gamma^m``, 0 after a terminal step) enters the learners as
``done = 1 - discount`` with ``SACConfig.gamma = 1`` (:func:`learner.offpolicy.batches.to_batch`),
which makes their target ``r + discount * (min Q' - alpha log pi)`` exactly.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor, nn

from learner.algorithms import crossq as _crossq
from learner.algorithms.critics import CriticEnsemble
from learner.algorithms.rlpd import RLPDConfig
from learner.algorithms.sac import OFF_POLICY_LEARNERS, SACConfig, SACLearner, adam
from learner.models import build_policy
from learner.models.encoder_kinds import load_pretrained
from learner.models.offpolicy import SquashedGaussianPolicy
from learner.models.policy import PolicySpec
from learner.offpolicy.config import OffPolicyConfig


class Encoded:
    """Observation features already computed by the policy's encoder (without gradient).

    The actor step reads the observation through the encoder twice -- the actor's view and the
    critic's ``Q(s, pi(s))`` -- with the same weights and no gradient to the encoder either
    time, so :func:`attach_encoder` makes the learner encode once and hand both networks this.
    """

    __slots__ = ("features",)

    def __init__(self, features: Tensor) -> None:
        self.features = features


def encoded_once(encoder: nn.Module) -> Any:
    """``obs -> Encoded(encoder(obs))`` under ``no_grad`` (the learner's ``features`` hook)."""

    def features(obs: Tensor | dict[str, Any]) -> Encoded:
        with torch.no_grad():
            return Encoded(encoder(obs))

    return features


class ActorView(nn.Module):
    """What the SAC learner calls ``actor``: ``obs -> TanhGaussian [B, A]``.

    Its parameters are the policy's MLP only; the encoder is held outside the module tree
    (so no optimiser of the actor sees it) and runs without gradient.
    """

    def __init__(self, policy: SquashedGaussianPolicy) -> None:
        super().__init__()
        self.net = policy.net
        self._policy = [policy]  # a list: not a registered submodule

    def forward(self, obs: Tensor | dict[str, Any] | Encoded):
        policy = self._policy[0]
        if isinstance(obs, Encoded):
            return policy.distribution(obs.features)
        with torch.no_grad():
            features = policy.encoder(obs)
        return policy.distribution(features)


class EncodedCritic(nn.Module):
    """``Q_j(encoder(obs), a) [E, B]``: the encoder is a submodule, trained by the critic loss."""

    def __init__(self, encoder: nn.Module, ensemble: nn.Module) -> None:
        super().__init__()
        self.encoder, self.ensemble = encoder, ensemble

    def forward(self, obs: Tensor | dict[str, Any] | Encoded, act: Tensor | None = None) -> Tensor:
        features = obs.features if isinstance(obs, Encoded) else self.encoder(obs)
        return self.ensemble(features, act)


def sac_config(cfg: OffPolicyConfig) -> SACConfig:
    a = cfg.algorithm
    kw: dict[str, Any] = dict(
        gamma=1.0,
        tau=a.tau,
        actor_lr=a.actor_lr,
        critic_lr=a.critic_lr,
        alpha_lr=a.alpha_lr,
        init_alpha=a.init_alpha,
        target_entropy=a.target_entropy,
        bc_weight=a.bc_weight,
    )
    if a.policy_delay is not None:
        kw["policy_delay"] = a.policy_delay
    if a.adam_beta1 is not None:
        kw["adam_beta1"] = a.adam_beta1
    if a.name == "crossq":
        return _crossq.CrossQConfig(**kw)
    return SACConfig(**kw)


def _make_learner(
    cfg: OffPolicyConfig, actor: nn.Module, feat_dim: int, action_dim: int
) -> SACLearner:
    """The registered factory of ``algorithm.name`` with this config's sizes."""
    a, m = cfg.algorithm, cfg.model
    sac = sac_config(cfg)
    factory = OFF_POLICY_LEARNERS.get(a.name)
    if a.name == "rlpd":
        rlpd = RLPDConfig(
            n_critics=a.critics(),
            critic_subset=a.critic_subset or 2,
            hidden=tuple(m.critic_hidden),
            sac=sac,
        )
        return factory(actor, feat_dim, action_dim, rlpd)
    return factory(
        actor, feat_dim, action_dim, sac, n_critics=a.critics(), hidden=tuple(m.critic_hidden)
    )


def attach_encoder(learner: SACLearner, encoder: nn.Module) -> None:
    """Put the pixel encoder in front of the learner's critic (and a copy in front of its
    target)."""
    learner.critic = EncodedCritic(encoder, learner.critic)
    if learner.target_critic is not None:
        learner.target_critic = copy.deepcopy(learner.critic).requires_grad_(False)
    c = learner.cfg
    learner.critic_opt = adam(learner.critic.parameters(), c.critic_lr, (c.adam_beta1, 0.999))
    learner.features = encoded_once(encoder)


def build(cfg: OffPolicyConfig, spec: PolicySpec) -> tuple[SquashedGaussianPolicy, SACLearner]:
    """(servable policy, learner) for a policy layout; weights seeded from ``cfg.seed``."""
    torch.manual_seed(cfg.seed)
    policy = build_policy("sac", spec, **cfg.model.build_kwargs())
    load_pretrained(policy.encoder.pixels, cfg.model.encoder.weights)  # frozen kind only
    learner = _make_learner(cfg, ActorView(policy), policy.encoder.out_dim, spec.action_dim)
    learner.served = policy  # the learner trains a view of it; the whole policy is served
    if policy.encoder.pixels is not None:
        attach_encoder(learner, policy.encoder)
    return policy, learner


def policy_spec(env_spec: Any, use_images: bool) -> PolicySpec:
    """The actor's layout: cameras only when it reads images; the env's robot spec rides along."""
    cams = dict(env_spec.cameras) if use_images else {}
    robot = None if env_spec.robot is None else env_spec.robot.with_policy(1, tuple(cams))
    return PolicySpec(
        state_dim=env_spec.state_dim,
        action_dim=env_spec.action_dim,
        chunk=1,
        cameras=cams,
        robot=robot,
    )


def critic_parts(learner: SACLearner) -> dict[str, nn.Module]:
    """The learner's modules beside the policy (for checkpoints)."""
    parts: dict[str, nn.Module] = {"critic": learner.critic, "temperature": learner.temperature}
    if learner.target_critic is not None:
        parts["target_critic"] = learner.target_critic
    return parts


__all__ = [
    "ActorView",
    "Encoded",
    "EncodedCritic",
    "CriticEnsemble",
    "build",
    "policy_spec",
    "sac_config",
    "critic_parts",
]
