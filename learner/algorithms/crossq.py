"""CrossQ (Bhatt et al. 2024): SAC without target networks, made stable by batch renormalisation.

The critic normalises its inputs and hidden layers with batch renormalisation
(``batch_renorm.py``). Target networks exist
to stop a critic from chasing its own moving estimate; CrossQ instead evaluates
``Q(s, a)`` and ``Q(s', a')`` in *one* joint forward pass over the concatenated batch, so
the BatchNorm statistics describe both the replay actions and the policy's next actions
(separate passes would normalise each with mismatched statistics, which is what breaks
naive BatchNorm in off-policy RL). The target ``Q(s', a')`` is then the same network with
stop-gradient. Fewer networks, no Polyak averaging, and it allows a UTD ratio of 1. There
is no target critic at all: none is built, updated or checkpointed.

The paper's other settings are :class:`CrossQConfig`'s defaults: policy delay 3 (one actor
step per 3 critic steps in ``update``), Adam beta1 0.5, learning rate 1e-3. The paper's
critics are wide (2048 units); pass ``hidden=(2048, 2048)`` where the compute allows. The
actor reads the critic in eval mode (running statistics), as in the reference implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from learner.algorithms.critics import CriticEnsemble
from learner.algorithms.sac import (
    OFF_POLICY_LEARNERS,
    Batch,
    SACConfig,
    SACLearner,
    sac_critic_loss,
    sac_critic_target,
)


def crossq_joint_q(
    critic: nn.Module, obs: Tensor, action: Tensor, next_obs: Tensor, next_action: Tensor
) -> tuple[Tensor, Tensor]:
    """One forward pass over ``[(s, a); (s', a')]``.

    Returns ``(Q(s, a), Q(s', a'))``, each ``[E, B]``.
    """
    n = obs.shape[0]
    q_all = critic(torch.cat([obs, next_obs]), torch.cat([action, next_action]))
    return q_all[:, :n], q_all[:, n:]


@dataclass
class CrossQConfig(SACConfig):
    """SAC settings with CrossQ's defaults, plus the batch renormalisation settings."""

    actor_lr: float = 1e-3
    critic_lr: float = 1e-3
    alpha_lr: float = 1e-3
    policy_delay: int = 3
    adam_beta1: float = 0.5
    renorm_warmup_steps: int = 100_000  # critic training passes of plain BatchNorm first
    bn_momentum: float = 0.01  # running-statistics rate (flax's 0.99)


class CrossQLearner(SACLearner):
    """SAC learner whose critic step uses the joint pass and no target network."""

    uses_target_critic: ClassVar[bool] = False

    def update_critic(self, batch: Batch) -> dict[str, float]:
        cfg = self.cfg
        with torch.no_grad():
            next_action, next_logp = self.actor(batch["next_obs"]).sample()
        self.critic.train()
        q, next_q = crossq_joint_q(
            self.critic, batch["obs"], batch["action"], batch["next_obs"], next_action
        )
        alpha = self.temperature.alpha.detach() if cfg.backup_entropy else 0.0
        target = sac_critic_target(
            batch["reward"], batch["done"], next_q.detach(), next_logp, alpha, cfg.gamma
        )
        loss = sac_critic_loss(q, target)
        self.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_opt.step()
        return {"critic_loss": float(loss.detach()), "q_mean": float(q.detach().mean())}

    def update_actor(self, batch: Batch) -> dict[str, float]:
        self.critic.eval()
        try:
            return super().update_actor(batch)
        finally:
            self.critic.train()


@OFF_POLICY_LEARNERS.register("crossq")
def make_crossq_learner(
    actor: nn.Module,
    obs_dim: int,
    action_dim: int,
    cfg: SACConfig | None = None,
    n_critics: int = 2,
    hidden: tuple[int, ...] = (256, 256),
) -> CrossQLearner:
    """CrossQ: batch-renormalised critic ensemble, joint forward pass, no target network.

    ``cfg`` None gives :class:`CrossQConfig` (the paper's settings); a plain
    :class:`SACConfig` is used as given, with the default renormalisation settings.
    """
    cfg = cfg if cfg is not None else CrossQConfig()
    renorm = cfg if isinstance(cfg, CrossQConfig) else CrossQConfig()
    critic = CriticEnsemble(
        obs_dim,
        action_dim,
        n_critics,
        hidden,
        batch_norm=True,
        renorm_warmup_steps=renorm.renorm_warmup_steps,
        bn_momentum=renorm.bn_momentum,
    )
    return CrossQLearner(actor, critic, action_dim, cfg)
