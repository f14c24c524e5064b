"""Offline learners over state observations: behaviour cloning and IQL, training the servable actor.

Both train the off-policy actor (``learner.models.offpolicy.SquashedGaussianPolicy``, model ``sac``)
and are :class:`~learner.algorithms.protocol.Algorithm` s (``update(batch)``, ``state_dict``,
``load_state_dict``, ``policy()``), so the offline runner drives them with the one loop of
:mod:`learner.runners.fit`. :data:`OFFLINE_LEARNERS` maps ``algorithm.name`` to its learner.

* :class:`BCTrainer` regresses the actor's deterministic action ``tanh(mean)`` onto the labels
  (``learner.algorithms.imitation.bc_loss``, weighted MSE); DAgger uses it on its aggregate.
* :class:`IQLTrainer` (Kostrikov et al. 2021, ``learner.algorithms.iql``): ``V`` is fit to the
  ``expectile`` of the *target* critics' ``min Q`` on dataset actions, ``Q`` to
  ``r + discount V(s')``, the target critics follow by Polyak averaging (``tau``), and the actor
  is extracted by advantage-weighted regression on dataset actions.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from learner.algorithms.critics import CriticEnsemble, soft_update
from learner.algorithms.imitation import bc_loss
from learner.algorithms.iql import (
    awr_actor_loss,
    awr_weights,
    iql_q_loss,
    iql_q_target,
    iql_value_loss,
)
from learner.models import build_policy
from learner.models.offpolicy import SquashedGaussianPolicy
from learner.models.policy import PolicySpec
from learner.offline.config import OfflineConfig
from rlinf_contracts.registry import Registry

Batch = dict[str, Tensor]
# dataset actions at the bounds (clipped oracle actions) are pulled this far inside for log pi
ACTION_EPS = 1e-4


def make_policy(cfg: OfflineConfig, spec: PolicySpec) -> SquashedGaussianPolicy:
    torch.manual_seed(cfg.seed)
    return build_policy("sac", spec, hidden=list(cfg.model.hidden))


#: ``algorithm.name`` -> learner class ``(cfg, policy) -> Algorithm``. DAgger is behaviour cloning
#: on an aggregate that grows by oracle-labelled rounds (``learner.offline.data.oracle_round``).
OFFLINE_LEARNERS: Registry[Callable[[OfflineConfig, SquashedGaussianPolicy], Any]] = Registry(
    "offline learner"
)


def _modules_state(parts: dict[str, Any]) -> dict[str, Any]:
    return {name: part.state_dict() for name, part in parts.items()}


def _load_modules(parts: dict[str, Any], state: dict[str, Any]) -> None:
    for name, part in parts.items():
        part.load_state_dict(state[name])


@OFFLINE_LEARNERS.register("bc")
@OFFLINE_LEARNERS.register("dagger")
class BCTrainer:
    """Weighted MSE of the actor's deterministic action onto the labels (``batch["weight"]``
    optional: HG-DAgger weighs human interventions up)."""

    def __init__(self, cfg: OfflineConfig, policy: SquashedGaussianPolicy) -> None:
        self.actor = policy
        self.opt = torch.optim.Adam(policy.parameters(), lr=cfg.algorithm.lr)

    def update(self, batch: Batch) -> dict[str, float]:
        pred = self.actor.distribution(self.actor.encoder(batch["obs"])).mode()
        loss = bc_loss(pred, batch["action"], batch.get("weight"))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return {"bc_loss": float(loss.detach())}

    def policy(self) -> SquashedGaussianPolicy:
        return self.actor

    def state_dict(self) -> dict[str, Any]:
        return _modules_state({"actor": self.actor, "opt": self.opt})

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _load_modules({"actor": self.actor, "opt": self.opt}, state)


@OFFLINE_LEARNERS.register("iql")
class IQLTrainer:
    """Value expectile, Q regression onto ``r + V(s')``, Polyak target, AWR actor: one step each."""

    def __init__(self, cfg: OfflineConfig, policy: SquashedGaussianPolicy) -> None:
        a, hidden = cfg.algorithm, tuple(cfg.model.hidden)
        self.cfg, self.actor = a, policy
        d, n_act = policy.spec.state_dim, policy.spec.action_dim
        self.critic = CriticEnsemble(d, n_act, a.n_critics, hidden, layer_norm=False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.value = CriticEnsemble(d, 0, 1, hidden)
        self.actor_opt = torch.optim.Adam(policy.parameters(), lr=a.lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=a.lr)
        self.value_opt = torch.optim.Adam(self.value.parameters(), lr=a.lr)

    def update(self, batch: Batch) -> dict[str, float]:
        a = self.cfg
        obs, act = batch["obs"], batch["action"]
        with torch.no_grad():
            q_target = self.target_critic(obs, act)
        v = self.value(obs).squeeze(0)
        v_loss = iql_value_loss(q_target, v, a.expectile)
        self._step(self.value_opt, v_loss)
        with torch.no_grad():
            next_v = self.value(batch["next_obs"]).squeeze(0)
        # ``done`` is 1 - the replay's discount (gamma, or 0 after a terminal step): gamma = 1 here
        y = iql_q_target(batch["reward"], batch["done"], next_v, 1.0)
        q_loss = iql_q_loss(self.critic(obs, act), y)
        self._step(self.critic_opt, q_loss)
        soft_update(self.target_critic, self.critic, a.tau)
        weights = awr_weights(q_target, v.detach(), a.beta)
        dist = self.actor.distribution(self.actor.encoder(obs))
        pi_loss = awr_actor_loss(dist.log_prob(act.clamp(-1 + ACTION_EPS, 1 - ACTION_EPS)), weights)
        self._step(self.actor_opt, pi_loss)
        return {
            "value_loss": float(v_loss.detach()),
            "q_loss": float(q_loss.detach()),
            "actor_loss": float(pi_loss.detach()),
            "v_mean": float(v.detach().mean()),
        }

    def policy(self) -> SquashedGaussianPolicy:
        return self.actor

    def _parts(self) -> dict[str, Any]:
        return {
            "actor": self.actor,
            "critic": self.critic,
            "target_critic": self.target_critic,
            "value": self.value,
            "actor_opt": self.actor_opt,
            "critic_opt": self.critic_opt,
            "value_opt": self.value_opt,
        }

    def state_dict(self) -> dict[str, Any]:
        return _modules_state(self._parts())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _load_modules(self._parts(), state)

    @staticmethod
    def _step(opt: torch.optim.Optimizer, loss: Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
