"""Soft actor-critic: losses as pure functions, plus a small learner that owns the optimisers.

Batches are dicts of tensors: ``obs [B, D]``, ``action [B, A]`` (in [-1, 1]), ``reward [B]``,
``next_obs [B, D]``, ``done [B]`` (1 = terminal, no bootstrap; time-limit truncations
should be stored with ``done = 0``). The actor is any ``nn.Module`` whose forward maps
``obs -> TanhGaussian``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.optim import Adam

from learner.algorithms.critics import CriticEnsemble, random_subset_min, soft_update
from rlinf_contracts.registry import Registry

Batch = dict[str, Tensor]

#: Off-policy learner factories ``(actor, obs_dim, action_dim, cfg) -> SACLearner``,
#: selected by ``algorithm.name: sac | rlpd | crossq``.
OFF_POLICY_LEARNERS: Registry[Callable[..., SACLearner]] = Registry("off-policy learner")


def sac_critic_target(
    reward: Tensor,
    done: Tensor,
    next_q: Tensor,
    next_logp: Tensor,
    alpha: float | Tensor,
    gamma: float,
) -> Tensor:
    """Soft Bellman target ``y = r + gamma (1 - d) (min_j Q'_j(s', a') - alpha log pi(a'|s'))``.

    ``next_q`` is ``[E, B]`` (the minimum is taken here) or an already reduced ``[B]``;
    ``a' ~ pi(.|s')`` is a fresh sample. The result carries no gradient.
    """
    q = next_q.min(dim=0).values if next_q.dim() == 2 else next_q
    soft_v = q - alpha * next_logp
    return (reward + gamma * (1.0 - done.to(reward.dtype)) * soft_v).detach()


def sac_critic_loss(q_pred: Tensor, target: Tensor) -> Tensor:
    """``sum_j 0.5 mean_b (Q_j(s, a) - y)^2`` over ensemble members ``q_pred [E, B]``."""
    return 0.5 * (q_pred - target.detach().unsqueeze(0)).square().mean(dim=-1).sum()


def sac_actor_loss(
    logp: Tensor, q_pi: Tensor, alpha: float | Tensor, reduce: str = "min"
) -> Tensor:
    """``E_s[alpha log pi(a|s) - Q(s, a)]`` with ``a ~ pi`` reparameterised.

    ``q_pi [E, B]`` is reduced over the ensemble by ``min`` (SAC) or ``mean`` (REDQ /
    RLPD, less pessimistic for the actor). ``alpha`` is treated as a constant.
    """
    if q_pi.dim() == 2:
        q_pi = q_pi.min(dim=0).values if reduce == "min" else q_pi.mean(dim=0)
    alpha = alpha.detach() if isinstance(alpha, Tensor) else alpha
    return (alpha * logp - q_pi).mean()


def prior_action_loss(mode: Tensor, prior_action: Tensor, mask: Tensor) -> Tensor:
    """Squared error of the actor's deterministic action to the prior data's action, summed over
    action dims and averaged over the rows ``mask`` marks (demos, a human's takeovers); 0 when
    none is marked.

    Why: a human's corrections arrive on the policy's own state distribution (HG-DAgger's
    labels), yet the sparse reward needs many updates to carry their value back through the
    critic; this term lets the actor learn from them directly (TD3+BC's regulariser, applied to
    the prior rows only). Prior actions are clipped to the actor's [-1, 1] range.

    >>> prior_action_loss(torch.zeros(2, 1), torch.tensor([[1.0], [3.0]]), torch.tensor([1, 0]))
    tensor(1.)
    """
    m = mask.to(mode.dtype)
    err = (mode - prior_action.clamp(-1.0, 1.0)).square().sum(dim=-1)
    return (err * m).sum() / m.sum().clamp(min=1.0)


def temperature_loss(log_alpha: Tensor, logp: Tensor, target_entropy: float) -> Tensor:
    """``-log_alpha * mean(log pi + H_target)`` (log pi detached).

    Its gradient is ``H(pi) - H_target``-signed: when the policy entropy ``-log pi`` is
    below the target, gradient descent raises ``alpha`` (more entropy bonus), and lowers
    it when the entropy is above. Optimising ``log alpha`` keeps ``alpha > 0``.
    """
    return -(log_alpha * (logp.detach() + target_entropy)).mean()


def default_target_entropy(action_dim: int, scale: float = 1.0) -> float:
    """SAC's heuristic ``H_target = -scale * |A|`` (``scale`` 0.5 is also common)."""
    return -scale * float(action_dim)


def adam(params: Iterable[Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999)) -> Adam:
    """Adam whose step is one fused kernel over all parameters (``fused=True``).

    Why: the default for-each Adam of a 2-critic ensemble, its actor and the temperature ran
    some 40 small kernels per update, a third of a small SAC update on one CPU core. The
    algorithm is Adam's; only the kernel differs (results agree to float rounding). Torch builds
    without the fused CPU kernel fall back to the for-each implementation.
    """
    params = list(params)
    try:
        return Adam(params, lr=lr, betas=betas, fused=True)
    except RuntimeError:  # pragma: no cover - torch without the fused CPU Adam
        return Adam(params, lr=lr, betas=betas, foreach=True)


class Temperature(nn.Module):
    """Learnable entropy temperature ``alpha = exp(log_alpha)``."""

    def __init__(self, init_alpha: float = 1.0) -> None:
        super().__init__()
        self.log_alpha = nn.Parameter(torch.tensor(math.log(init_alpha)))

    @property
    def alpha(self) -> Tensor:
        return self.log_alpha.exp()


@dataclass
class SACConfig:
    """SAC hyper-parameters (defaults follow the SAC paper / SERL)."""

    gamma: float = 0.99  # discount
    tau: float = 0.005  # Polyak rate of the target critics
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    init_alpha: float = 1.0
    target_entropy: float | None = None  # None -> -entropy_scale * action_dim
    entropy_scale: float = 1.0
    critic_subset: int | None = None  # None -> min over all critics; RLPD: 2
    actor_q_reduce: str = "min"  # "min" (SAC) or "mean" (REDQ / RLPD)
    backup_entropy: bool = True  # include -alpha log pi(a'|s') in the critic target
    learn_alpha: bool = True
    policy_delay: int = 1  # update() steps the actor once per this many critic steps
    adam_beta1: float = 0.9  # Adam's beta1 of the actor and critic optimisers (CrossQ: 0.5)
    # actor: + bc_weight x prior_action_loss on the rows the batch's "prior" mask marks
    bc_weight: float = 0.0

    def __post_init__(self) -> None:
        if self.policy_delay < 1:
            raise ValueError(f"SACConfig.policy_delay must be >= 1, got {self.policy_delay}")


class SACLearner:
    """Owns actor, critic ensemble, target critic, temperature and their optimisers.

    ``update(batch)`` = one critic step, plus one actor / temperature step every
    ``cfg.policy_delay`` calls. Callers wanting a high update-to-data ratio call
    :meth:`update_critic` several times per :meth:`update_actor` (see
    :func:`learner.algorithms.rlpd.rlpd_update`). Subclasses without a target network
    (CrossQ) set ``uses_target_critic = False``: ``target_critic`` is then None and is
    neither built nor checkpointed.

    It is a :class:`~learner.algorithms.protocol.Algorithm`: :meth:`policy` is ``served``, the
    network whose weights are published -- ``actor`` itself unless a caller wraps the actor (the
    off-policy runner trains a view of its servable policy and sets ``served`` to that policy).
    """

    uses_target_critic: ClassVar[bool] = True

    def __init__(
        self,
        actor: nn.Module,
        critic: CriticEnsemble,
        action_dim: int,
        cfg: SACConfig | None = None,
    ) -> None:
        self.cfg = cfg or SACConfig()
        self.actor, self.critic = actor, critic
        self.served: nn.Module = actor
        self.target_critic: CriticEnsemble | None = (
            copy.deepcopy(critic).requires_grad_(False) if self.uses_target_critic else None
        )
        self.updates = 0  # calls of update(), for the policy delay
        self.temperature = Temperature(self.cfg.init_alpha)
        self.target_entropy = (
            self.cfg.target_entropy
            if self.cfg.target_entropy is not None
            else default_target_entropy(action_dim, self.cfg.entropy_scale)
        )
        betas = (self.cfg.adam_beta1, 0.999)
        self.actor_opt = adam(actor.parameters(), self.cfg.actor_lr, betas)
        self.critic_opt = adam(critic.parameters(), self.cfg.critic_lr, betas)
        self.alpha_opt = adam(self.temperature.parameters(), self.cfg.alpha_lr)
        # obs -> what actor and critic read in the actor step; identity for state observations,
        # a pixel run's encoder features computed once (learner.offpolicy.nets.attach_encoder)
        self.features: Callable[[Any], Any] = _same

    @property
    def alpha(self) -> float:
        return float(self.temperature.alpha.detach())

    @torch.no_grad()
    def bellman_target(self, batch: Batch) -> Tensor:
        """``y`` of :func:`sac_critic_target` with ``a' ~ pi(.|s')`` and the *target* critics
        (random-subset minimum when ``cfg.critic_subset`` is set)."""
        cfg = self.cfg
        if self.target_critic is None:
            raise RuntimeError(
                f"{type(self).__name__} has no target critic: override bellman_target"
            )
        next_action, next_logp = self.actor(batch["next_obs"]).sample()
        next_q = random_subset_min(
            self.target_critic(batch["next_obs"], next_action), cfg.critic_subset
        )
        alpha = self.temperature.alpha if cfg.backup_entropy else 0.0
        return sac_critic_target(
            batch["reward"], batch["done"], next_q, next_logp, alpha, cfg.gamma
        )

    def update_critic(self, batch: Batch) -> dict[str, float]:
        """One gradient step on the soft Bellman error, then a Polyak target update."""
        cfg = self.cfg
        target = self.bellman_target(batch)
        q = self.critic(batch["obs"], batch["action"])
        loss = sac_critic_loss(q, target)
        self.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_opt.step()
        if self.target_critic is not None:
            soft_update(self.target_critic, self.critic, cfg.tau)
        return {"critic_loss": float(loss.detach()), "q_mean": float(q.detach().mean())}

    def update_actor(self, batch: Batch) -> dict[str, float]:
        """One actor step on ``alpha log pi - Q`` and one temperature step.

        ``features(obs)`` is computed once for both networks: the actor and the critic read the
        same observation with the same (no-gradient) encoder here, so one forward serves both.
        """
        obs = self.features(batch["obs"])
        dist = self.actor(obs)
        action, logp = dist.rsample()
        self.critic.requires_grad_(False)
        q_pi = self.critic(obs, action)
        self.critic.requires_grad_(True)
        loss = sac_actor_loss(logp, q_pi, self.temperature.alpha, self.cfg.actor_q_reduce)
        metrics: dict[str, float] = {}
        if self.cfg.bc_weight > 0 and "prior" in batch:
            prior = prior_action_loss(dist.mode(), batch["action"], batch["prior"])
            loss = loss + self.cfg.bc_weight * prior
            metrics["bc_loss"] = float(prior.detach())
        self.actor_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.actor_opt.step()
        metrics.update(actor_loss=float(loss.detach()), entropy=float(-logp.detach().mean()))
        if self.cfg.learn_alpha:
            a_loss = temperature_loss(self.temperature.log_alpha, logp, self.target_entropy)
            self.alpha_opt.zero_grad(set_to_none=True)
            a_loss.backward()
            self.alpha_opt.step()
        metrics["alpha"] = self.alpha
        return metrics

    def update(self, batch: Batch) -> dict[str, float]:
        """A critic step; an actor / temperature step too on every ``policy_delay``-th call."""
        self.updates += 1
        metrics = self.update_critic(batch)
        if self.updates % self.cfg.policy_delay == 0:
            metrics.update(self.update_actor(batch))
        return metrics

    def policy(self) -> nn.Module:
        """The network whose weights are published and served."""
        return self.served

    def state_dict(self) -> dict[str, dict]:
        """Everything needed to resume: networks, temperature, optimiser states and the update
        counter (it decides which ``update`` also steps the actor under a policy delay)."""
        state = {name: part.state_dict() for name, part in self._parts().items()}
        state["counters"] = {"updates": self.updates}
        return state

    def load_state_dict(self, state: dict[str, dict]) -> None:
        for name, part in self._parts().items():
            part.load_state_dict(state[name])
        self.updates = int(state["counters"]["updates"])

    def _parts(self) -> dict[str, nn.Module | torch.optim.Optimizer]:
        parts: dict[str, nn.Module | torch.optim.Optimizer] = {
            "actor": self.actor,
            "critic": self.critic,
            "temperature": self.temperature,
            "actor_opt": self.actor_opt,
            "critic_opt": self.critic_opt,
            "alpha_opt": self.alpha_opt,
        }
        if self.target_critic is not None:
            parts["target_critic"] = self.target_critic
        return parts

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool = False) -> Tensor:
        dist = self.actor(obs)
        return dist.mode() if deterministic else dist.sample()[0]


def _same(obs: Any) -> Any:
    return obs


@OFF_POLICY_LEARNERS.register("sac")
def make_sac_learner(
    actor: nn.Module,
    obs_dim: int,
    action_dim: int,
    cfg: SACConfig | None = None,
    n_critics: int = 2,
    hidden: tuple[int, ...] = (256, 256),
) -> SACLearner:
    """SAC with a clipped double-Q ensemble (``n_critics`` members, min over all)."""
    critic = CriticEnsemble(obs_dim, action_dim, n_critics, hidden, layer_norm=False)
    return SACLearner(actor, critic, action_dim, cfg)
