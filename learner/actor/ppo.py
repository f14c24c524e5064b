"""Embodied PPO / GRPO: advantages (GAE or GRPO groups) + clipped PPO epochs on one rollout.

One iteration reads in three files: the fused worker (``learner.runners.fused``) collects a
:class:`~learner.rollout.trajectory.Trajectory` and hands it to :meth:`PPOLearner.update`, which
computes the advantages (:func:`advantages`), runs ``epochs x minibatches`` steps (:meth:`_step`)
and calls the pure losses of :mod:`learner.algorithms.policy_loss`. Pure torch, no Ray; it is a
:class:`learner.algorithms.protocol.Algorithm`: ``update(batch)`` takes the rollout alone, the
iteration (learning-rate schedule, critic warm-up) and the minibatch order's seed are state it
keeps and restores through ``state_dict``, so a resumed run draws the same minibatches.
The estimator is the one the config resolved from the shared registry
(:data:`learner.algorithms.ADVANTAGES`); :func:`advantages` feeds it what env rollouts hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from learner.actor.ddp import GradSync
from learner.algorithms.advantages import broadcast_to_tokens, compute_advantages, whiten
from learner.algorithms.aggregation import step_weights
from learner.algorithms.policy_loss import ppo_policy_loss, value_loss
from learner.models import Policy
from learner.rollout.collect import derive_seed, seed_everything
from learner.rollout.trajectory import Trajectory
from learner.runners.config import ActorConfig, AlgorithmConfig
from rlinf_contracts.config import ConfigError


@dataclass
class TensorBatch:
    """A :class:`Trajectory` as torch tensors (``[B, T, ...]``)."""

    state: Tensor
    images: dict[str, Tensor]
    actions: Tensor
    logp: Tensor
    values: Tensor
    rewards: Tensor
    dones: Tensor
    mask: Tensor
    bootstrap: Tensor
    scores: Tensor
    instructions: np.ndarray | None = None  # [B, T] strings (language-conditioned envs)

    @classmethod
    def from_trajectory(cls, t: Trajectory) -> TensorBatch:
        f = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float32))  # noqa: E731
        return cls(
            state=f(t.obs["state"]),
            images={k: torch.as_tensor(v) for k, v in t.obs.get("images", {}).items()},
            actions=f(t.actions),
            logp=f(t.logp),
            values=f(t.values),
            rewards=f(t.rewards),
            dones=f(t.dones),
            mask=f(t.mask),
            bootstrap=f(t.bootstrap_value),
            scores=f(t.scores),
            instructions=t.obs.get("instruction"),
        )


def advantages(b: TensorBatch, algo: AlgorithmConfig) -> tuple[Tensor, Tensor]:
    """``(advantages, returns)``, both ``[B, T]``, from the config's resolved estimator.

    With a critic: GAE over env steps, bootstrapped from the value after the last step and cut
    at episode ends, whitened over the valid steps when ``algorithm.whiten_adv``. Without: one
    advantage per episode (its return against its group's, all reset from the same initial
    state) on every step of it (but steps a group shared, ``algorithm.shared_prefix``, are
    masked), never re-whitened; returns are unused (zeros). Either way scaled
    per step by ``algorithm.agg_mode`` (``seq-mean-token-mean``: every episode weighs the same,
    however long -- failures run to the time limit, successes end early).
    """
    est = algo.estimator
    if est.needs_critic:
        adv, ret = est(
            b.rewards,
            b.values,
            b.mask,
            algo.gamma,
            algo.lam,
            bootstrap_value=b.bootstrap,
            dones=b.dones,
        )
        adv = whiten(adv, b.mask) if algo.whiten_adv and b.mask.sum() > 1 else adv
    else:
        # Not whitened: the group already normalises, and a step-weighted batch mean would shift
        # every advantage by the success/failure length gap (failures run longer), so an all-fail
        # group -- no signal -- would be reinforced.
        adv = broadcast_to_tokens(
            compute_advantages(est, scores=b.scores, group_size=algo.group_size), b.mask
        )
        ret = torch.zeros_like(adv)
    # ``algorithm.agg_mode`` as per-step weights on the advantage: the clipped loss is positively
    # homogeneous in A, so w * L(A) == L(w * A), and the minibatches' step-mean then estimates the
    # mode's loss (a row = one env's steps of the iteration; one episode for outcome estimators).
    if algo.agg_mode != "token-mean":
        adv = adv * step_weights(b.mask, algo.agg_mode)
    return adv, ret


def under(name: str, prefix: str) -> bool:
    """Whether a dotted tensor name is ``prefix`` or lies under it (``head`` covers ``head.w``, not
    ``header``)."""
    return name == prefix or name.startswith(prefix + ".")


def names_under(names: list[str], prefixes: list[str], key: str, what: str) -> list[str]:
    """The ``names`` under any of ``prefixes``; a prefix that covers none is a config error naming
    ``key``."""
    unused = [k for k in prefixes if not any(under(n, k) for n in names)]
    if unused:
        tops = sorted({n.split(".")[0] for n in names})
        raise ConfigError(
            f"key '{key}' names {unused}, which match no {what} of the model; "
            f"its top-level parts are {tops}"
        )
    return [n for n in names if any(under(n, k) for k in prefixes)]


def lr_groups(
    policy: torch.nn.Module, scales: dict[str, float]
) -> dict[float, list[torch.nn.Parameter]]:
    """Trainable parameters grouped by ``actor.lr_scale`` multiplier (longest matching name prefix).

    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    >>> {k: len(v) for k, v in lr_groups(net, {"1": 10.0}).items()}
    {1.0: 2, 10.0: 2}
    """
    names_under(
        [n for n, _ in policy.named_parameters()], list(scales), "actor.lr_scale", "parameter"
    )
    groups: dict[float, list[torch.nn.Parameter]] = {}
    for name, p in policy.named_parameters():
        if not p.requires_grad:
            continue
        hits = [k for k in scales if under(name, k)]
        scale = float(scales[max(hits, key=len)]) if hits else 1.0
        groups.setdefault(scale, []).append(p)
    return groups


class PPOLearner:
    """Owns the policy's optimiser and the iteration counter; one :meth:`update` per iteration.

    ``seed``: the run's seed; iteration ``i`` on rank ``r`` reseeds from ``(seed, "actor", r, i)``.
    """

    def __init__(
        self,
        policy: Policy,
        algo: AlgorithmConfig,
        actor: ActorConfig,
        total_iterations: int = 1,
        sync: GradSync | None = None,
        seed: int = 0,
    ) -> None:
        self.model, self.algo, self.cfg = policy, algo, actor
        self.total_iterations = max(1, total_iterations)
        self.sync = sync or GradSync(0, 1)
        self.seed, self.iteration = seed, 0
        self._make_optimizer()
        self._set_lr(0)

    def _make_optimizer(self) -> None:
        """Adam over the trainable parameters; again after a strategy replaced them (sharding)."""
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        groups = lr_groups(self.model, dict(self.cfg.lr_scale))
        self.optimizer = torch.optim.Adam(
            [{"params": ps, "scale": sc} for sc, ps in groups.items()], lr=self.cfg.lr, eps=1e-5
        )

    def _set_lr(self, iteration: int) -> None:
        frac = 1.0 - iteration / self.total_iterations if self.cfg.anneal_lr else 1.0
        for g in self.optimizer.param_groups:
            g["lr"] = self.cfg.lr * g["scale"] * max(frac, 0.0)

    def policy(self) -> Policy:
        return self.model

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "iteration": self.iteration,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        if state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        self.iteration = int(state["iteration"])

    def update(self, batch: Trajectory) -> dict[str, float]:
        """Advantages, then ``epochs x minibatches`` PPO steps, then the state normaliser."""
        iteration = self.iteration
        generator = seed_everything(derive_seed(self.seed, "actor", self.sync.rank, iteration))
        b = TensorBatch.from_trajectory(batch)
        adv, ret = advantages(b, self.algo)
        valid = b.mask.reshape(-1) > 0
        flat = lambda x: x.reshape(-1, *x.shape[2:])[valid]  # noqa: E731  [B, T, ...] -> [N, ...]
        state, actions, old_logp, old_v = (
            flat(b.state),
            flat(b.actions),
            flat(b.logp),
            flat(b.values),
        )
        images = {k: flat(v) for k, v in b.images.items()}
        instr = None if b.instructions is None else b.instructions.reshape(-1)[valid.numpy()]
        adv, ret = flat(adv), flat(ret)
        self._set_lr(iteration)
        use_critic = self.algo.estimator.needs_critic
        # critic warm-up: the value head learns the SFT policy's returns before any advantage
        # moves the policy
        policy_weight = 0.0 if iteration < self.cfg.critic_warmup_iters else 1.0
        stats: dict[str, list[float]] = {}
        self.model.train()
        for _ in range(self.cfg.epochs):
            perm = torch.randperm(state.shape[0], generator=generator)
            for idx in torch.tensor_split(perm, self.cfg.minibatches):
                obs = {
                    "state": state[idx],
                    "images": {k: v[idx] for k, v in images.items()},
                    "instruction": [] if instr is None else instr[idx.numpy()].tolist(),
                }
                m = self._step(
                    obs,
                    actions[idx],
                    old_logp[idx],
                    old_v[idx],
                    adv[idx],
                    ret[idx],
                    use_critic,
                    policy_weight,
                )
                for k, v in m.items():
                    stats.setdefault(k, []).append(v)
            if (
                self.cfg.target_kl is not None
                and self._global_mean(stats["approx_kl"][-self.cfg.minibatches :])
                > self.cfg.target_kl
            ):
                break
        self.model.eval()
        self._update_normalizer(state)
        out = {k: float(np.mean(v)) for k, v in stats.items()}
        out["lr"] = self.optimizer.param_groups[0]["lr"]
        if policy_weight == 0.0:
            out["critic_warmup"] = 1.0
        self.iteration += 1
        return out

    def _step(
        self,
        obs: dict[str, Any],
        actions: Tensor,
        old_logp: Tensor,
        old_v: Tensor,
        adv: Tensor,
        ret: Tensor,
        use_critic: bool,
        policy_weight: float = 1.0,
    ) -> dict[str, float]:
        n = actions.shape[0]
        self.optimizer.zero_grad(set_to_none=False)
        metrics: dict[str, float] = {}
        if n > 0:
            out = self.model(obs)
            ones = torch.ones(n)
            pl, metrics = ppo_policy_loss(
                out.dist.log_prob(actions),
                old_logp,
                adv,
                ones,
                clip_low=self.algo.clip_low,
                clip_high=self.algo.clip_high,
                dual_clip=self.algo.dual_clip,
            )
            entropy = out.dist.entropy().mean()
            loss = policy_weight * (pl - self.algo.entropy_coef * entropy)
            if use_critic and out.value is not None:
                vl, vm = value_loss(out.value, old_v, ret, ones, clip=self.algo.vf_clip)
                loss = loss + self.algo.vf_coef * vl
                metrics = {**metrics, "value_loss": float(vl.detach()), **vm}
            loss.backward()
            metrics = {
                **metrics,
                "policy_loss": float(pl.detach()),
                "entropy": float(entropy.detach()),
            }
        self.sync.average_grads(self.params)
        grad_norm = self.sync.clip_grad_norm(self.params, self.algo.max_grad_norm)
        self.optimizer.step()
        return {**metrics, "grad_norm": grad_norm}

    def _global_mean(self, values: list[float]) -> float:
        t = self.sync.sum(
            torch.tensor([float(np.sum(values)), float(len(values))], dtype=torch.float64)
        )
        return float(t[0] / t[1].clamp_min(1.0))

    def _update_normalizer(self, state: Tensor) -> None:
        """Merge this iteration's states (over all ranks) into the running normaliser."""
        norm = getattr(self.model, "norm", None)
        if norm is None or state.numel() == 0 and self.sync.world_size == 1:
            return
        x = state.double().reshape(-1, norm.mean.shape[0])
        moments = self.sync.sum(
            torch.cat(
                [
                    torch.tensor([float(x.shape[0])], dtype=torch.float64),
                    x.sum(0),
                    x.square().sum(0),
                ]
            )
        )
        n = moments[0]
        if n < 1:
            return
        mean = moments[1 : 1 + x.shape[1]] / n
        var = (moments[1 + x.shape[1] :] / n - mean.square()).clamp_min(0.0)
        norm.update_from_moments(mean.float(), var.float(), float(n))
