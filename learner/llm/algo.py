"""Reasoning-RL algorithm settings and the per-batch math, all delegated to ``learner.algorithms``.

GRPO, Dr.GRPO, DAPO, REINFORCE++ are *configurations* of the shared library, not new code:

- GRPO: ``adv: grpo``, ``loss: ppo``, ``agg_mode: seq-mean-token-mean`` (or token-mean).
- Dr.GRPO: ``adv: dr_grpo``, ``agg_mode: seq-mean-token-sum-norm``.
- DAPO: ``clip_high: 0.28``, ``dynamic_sampling: true``, ``overlong_buffer > 0``, ``token-mean``.
- REINFORCE++: ``adv: reinforce_pp`` (or ``reinforce_pp_baseline``), optional ``kl_in_reward``.
The section extends :class:`learner.sections.PolicyAlgorithmConfig` (shared with the embodied
runner); the functions below branch on the resolved ``algo.estimator``, never on its name.

- PPO with a critic: ``adv: gae`` plus an ``algorithm.critic`` section (:mod:`learner.llm.critic`);
  token rewards are the score on the last response token (+ KL penalty with ``kl_in_reward``),
  advantages are GAE over response tokens with the critic's values (:func:`gae_advantages`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from learner.algorithms import (
    KL_ESTIMATORS,
    POLICY_LOSSES,
    broadcast_to_tokens,
    compute_advantages,
    dynamic_sampling_mask,
    gae,
    global_normalizer,
    kl_estimate,
    kl_loss,
    kl_penalized_rewards,
    overlong_penalty,
    whiten,
)
from learner.llm.critic import CriticConfig
from learner.sections import PolicyAlgorithmConfig, h
from rlinf_contracts.config import ConfigError

__all__ = [
    "LLMAlgorithmConfig",
    "shape_scores",
    "keep_mask",
    "token_rewards",
    "token_advantages",
    "gae_advantages",
    "policy_objective",
    "step_normalizer",
]


@dataclass
class LLMAlgorithmConfig(PolicyAlgorithmConfig):
    """The shared policy-gradient section plus the LLM knobs: loss choice, aggregation, KL, DAPO
    (``algorithm:`` of the reasoning runner; the embodied one is
    :class:`learner.runners.config.AlgorithmConfig`)."""

    adv: str = field(
        default="grpo",
        metadata=h(
            "advantage estimator (learner.algorithms.ADVANTAGES); gae needs algorithm.critic"
        ),
    )
    gamma: float = field(default=1.0, metadata=h("discount for token-level returns"))
    whiten_adv: bool = field(
        default=True, metadata=h("whiten GAE advantages over the batch (adv: gae only)")
    )
    loss: str = field(default="ppo", metadata=h("policy loss (learner.algorithms.POLICY_LOSSES)"))
    norm_constant: float | None = field(
        default=None, metadata=h("constant for seq-mean-token-sum-norm (default max_new_tokens)")
    )
    kl_coef: float = field(default=0.0, metadata=h("KL-to-reference weight; > 0 needs a ref model"))
    kl_kind: str = field(default="k3", metadata=h("KL estimator k1 | k2 | k3"))
    kl_in_reward: bool = field(
        default=False, metadata=h("fold KL into token rewards (REINFORCE++) instead of the loss")
    )
    critic: CriticConfig | None = field(
        default=None,
        metadata=h(
            "value model + optimizer; required by (and only used with) an estimator that needs a "
            "critic (gae)"
        ),
    )
    dynamic_sampling: bool = field(
        default=False, metadata=h("DAPO: drop groups whose rewards are all equal")
    )
    overlong_buffer: int = field(
        default=0, metadata=h("DAPO overlong shaping buffer in tokens (0 = off)")
    )
    overlong_factor: float = field(default=1.0, metadata=h("DAPO overlong penalty at max length"))

    def validate(self) -> None:
        super().validate()
        for key, name, reg in (
            ("loss", self.loss, POLICY_LOSSES),
            ("kl_kind", self.kl_kind, KL_ESTIMATORS),
        ):
            if name not in reg:
                raise ConfigError(
                    f"algorithm.{key}={name!r} is unknown; choose one of {reg.names()}"
                )
        if self.estimator.needs_critic and self.critic is None:
            raise ConfigError(
                f"algorithm.adv={self.adv} needs a critic: add an algorithm.critic section "
                "(e.g. algorithm.critic: {lr: 1.0e-3}), or use a critic-free adv "
                "(grpo, dr_grpo, rloo, reinforce_pp, reinforce_pp_baseline)"
            )
        if not self.estimator.needs_critic and self.critic is not None:
            raise ConfigError(
                f"algorithm.critic is set but algorithm.adv={self.adv!r} does not use a critic; "
                "set algorithm.adv=gae or remove algorithm.critic"
            )
        if self.kl_coef < 0:
            raise ConfigError(f"algorithm.kl_coef must be >= 0, got {self.kl_coef}")


def shape_scores(
    algo: LLMAlgorithmConfig, scores: Tensor, lengths: Tensor, max_new_tokens: int
) -> Tensor:
    """Outcome scores after DAPO overlong shaping (identity when ``overlong_buffer`` is 0)."""
    if algo.overlong_buffer <= 0:
        return scores
    return scores + overlong_penalty(
        lengths, max_new_tokens, algo.overlong_buffer, algo.overlong_factor
    )


def keep_mask(algo: LLMAlgorithmConfig, scores: Tensor, group_size: int) -> Tensor:
    """Samples to train on: all, or (DAPO dynamic sampling) those of groups with mixed rewards."""
    if not algo.dynamic_sampling:
        return torch.ones_like(scores, dtype=torch.bool)
    return dynamic_sampling_mask(scores, group_size)


def token_advantages(
    algo: LLMAlgorithmConfig,
    scores: Tensor,
    mask: Tensor,
    group_size: int,
    logp: Tensor | None = None,
    ref_logp: Tensor | None = None,
    dense: Tensor | None = None,
) -> Tensor:
    """Per-token advantages ``[N, R]`` from outcome ``scores [N]`` with the configured estimator.

    Critic-free estimators only; one that needs a critic needs values, see :func:`gae_advantages`.
    Token-signal estimators (REINFORCE++) get :func:`token_rewards` (KL folded in when
    ``kl_in_reward``); a grouped one also gets the scores and centres them itself, so only the
    KL part goes in as token rewards. Outcome estimators (GRPO...) score whole samples.
    """
    est = algo.estimator
    if est.needs_critic:
        raise ValueError(
            f"algorithm.adv={est.name} needs the critic's values: call gae_advantages(algo, "
            "scores, mask, values)"
        )
    if est.signal == "outcome":
        return broadcast_to_tokens(
            compute_advantages(est, scores=scores, group_size=group_size), mask
        )
    rewards = token_rewards(algo, scores, mask, logp, ref_logp, dense)
    if est.grouped:
        rewards = rewards - token_rewards(algo, scores, mask)
    return compute_advantages(
        est,
        scores=scores,
        mask=mask,
        group_size=group_size,
        token_rewards=rewards,
        gamma=algo.gamma,
    )


def token_rewards(
    algo: LLMAlgorithmConfig,
    scores: Tensor,
    mask: Tensor,
    logp: Tensor | None = None,
    ref_logp: Tensor | None = None,
    dense: Tensor | None = None,
) -> Tensor:
    """``[N, R]`` rewards: each score on its last response token, plus ``dense`` per-token rewards
    (per-turn rewards of agentic episodes), minus ``kl_coef * KL`` per token when ``kl_in_reward``
    (and both log-probs are given); 0 at padding and at masked (tool) tokens."""
    last = mask.cumsum(-1) == mask.sum(-1, keepdim=True)
    rewards = (last & mask.bool()).to(scores.dtype) * scores[:, None]
    if dense is not None:
        rewards = rewards + dense.to(rewards.dtype) * mask
    if algo.kl_in_reward and algo.kl_coef > 0 and logp is not None and ref_logp is not None:
        rewards = kl_penalized_rewards(rewards, logp, ref_logp, mask, algo.kl_coef, algo.kl_kind)
    return rewards


def gae_advantages(
    algo: LLMAlgorithmConfig,
    scores: Tensor,
    mask: Tensor,
    values: Tensor,
    logp: Tensor | None = None,
    ref_logp: Tensor | None = None,
    dense: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """PPO-with-a-critic: ``(advantages, returns)``, both ``[N, R]``.

    GAE (:func:`learner.algorithms.gae`, ``algo.gamma`` / ``algo.lam``) over the response tokens
    of :func:`token_rewards` with the critic's ``values``; nothing is bootstrapped after the last
    token (the answer is finished). ``returns = A + V`` are the critic's regression targets and
    stay unwhitened; the advantages are whitened over the batch when ``algo.whiten_adv``.
    """
    rewards = token_rewards(algo, scores, mask, logp, ref_logp, dense)
    adv, returns = gae(rewards, values.to(rewards.dtype), mask, algo.gamma, algo.lam)
    if algo.whiten_adv:
        adv = whiten(adv, mask)
    return adv, returns


def policy_objective(
    algo: LLMAlgorithmConfig,
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    normalizer: float,
    ref_logp: Tensor | None = None,
    entropy: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Total loss of one micro-batch: shared-library policy loss (+ KL loss, + entropy bonus).

    ``normalizer`` is the global one of the whole step (see ``learner.algorithms.aggregation``),
    so summing micro-batch losses reproduces the full-batch loss exactly.
    """
    fn = POLICY_LOSSES.get(algo.loss)
    loss, metrics = fn(
        logp,
        old_logp,
        advantages,
        mask,
        clip_low=algo.clip_low,
        clip_high=algo.clip_high,
        dual_clip=algo.dual_clip,
        agg_mode=algo.agg_mode,
        normalizer=normalizer,
    )
    metrics = {f"actor/{k}": v for k, v in metrics.items()}
    if algo.kl_coef > 0 and not algo.kl_in_reward and ref_logp is not None:
        kl = kl_loss(logp, ref_logp, mask, algo.kl_kind, algo.agg_mode, normalizer)
        loss = loss + algo.kl_coef * kl
        metrics["actor/kl"] = float(kl.detach())
    elif ref_logp is not None:
        with torch.no_grad():
            k = kl_estimate(logp, ref_logp, algo.kl_kind)
            metrics["actor/kl"] = float((k * mask).sum() / mask.sum().clamp_min(1))
    if algo.entropy_coef > 0 and entropy is not None:
        from learner.algorithms import entropy_loss

        loss = loss + algo.entropy_coef * entropy_loss(entropy, mask, algo.agg_mode, normalizer)
    return loss, metrics


def step_normalizer(algo: LLMAlgorithmConfig, mask: Tensor, max_new_tokens: int) -> float:
    """The global loss normaliser of a whole training step (all micro-batches together)."""
    const = algo.norm_constant if algo.norm_constant is not None else float(max_new_tokens)
    return global_normalizer(mask, algo.agg_mode, const)
