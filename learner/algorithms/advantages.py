"""Advantage estimators: GAE, GRPO / Dr.GRPO, RLOO, REINFORCE++ (+baseline), whitening.

Conventions: sequence tensors are ``[B, T]`` (batch of token or env-step sequences);
``mask`` is 1 at valid positions. Every function returns zeros at masked positions,
and values stored at masked positions never influence the result, so padding is free.
Outcome-reward estimators (GRPO, RLOO) take one score per sample ``[N]`` laid out as
``N = groups * group_size`` contiguous groups (all samples of one prompt / initial
state next to each other) and return ``[N]``; use :func:`broadcast_to_tokens` to turn
that into ``[N, T]``.

Each estimator is registered in :data:`ADVANTAGES` as an :class:`AdvantageEstimator`: the
function plus what it needs (a critic's values, an outcome score per sample, token rewards;
contiguous groups or not). A config names one (``algorithm.adv: grpo``); the config section
resolves that name once, at validation, and the runners branch on the estimator's flags,
never on its name. :func:`compute_advantages` calls one with whatever inputs the runner
has, passing each estimator only the arguments it accepts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from rlinf_contracts.registry import Registry

Signal = Literal["value", "outcome", "token"]


@dataclass(frozen=True)
class AdvantageEstimator:
    """A registered estimator and the facts a runner needs to feed it.

    Why a spec and not a bare function: which data to collect (one whole episode per env row,
    a value head, groups reset from one seed) follows from the estimator, and deciding that
    from its *name* in every module is how string checks spread. Runners read these flags.

    ``signal`` is what the estimator consumes: ``value`` = per-step rewards and a critic's
    values (GAE); ``outcome`` = one score per sample (episode return / response reward);
    ``token`` = per-token rewards (REINFORCE++). ``grouped``: samples come in contiguous
    groups of ``group_size`` sharing a prompt / initial state. Calling the spec calls the
    function, so ``ADVANTAGES.get("grpo")(scores, 4)`` works.

    >>> est = ADVANTAGES.get("grpo")
    >>> (est.needs_critic, est.grouped, est.signal)
    (False, True, 'outcome')
    >>> ADVANTAGES.get("gae").needs_critic
    True
    """

    name: str
    fn: Callable[..., Any]
    signal: Signal
    grouped: bool = False

    @property
    def needs_critic(self) -> bool:
        return self.signal == "value"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


ADVANTAGES: Registry[AdvantageEstimator] = Registry("advantage estimator")


def estimator(
    name: str, signal: Signal, grouped: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``fn`` in :data:`ADVANTAGES` under ``name``; returns ``fn`` unchanged."""

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        ADVANTAGES.add(name, AdvantageEstimator(name, fn, signal, grouped))
        return fn

    return decorator


def _group(scores: Tensor, group_size: int) -> Tensor:
    """Reshape ``[N]`` scores into ``[N // group_size, group_size]`` with a clear error."""
    if scores.dim() != 1:
        raise ValueError(f"scores must be 1-D [N], got shape {tuple(scores.shape)}")
    if group_size < 1 or scores.numel() % group_size:
        raise ValueError(
            f"group_size={group_size} must be >= 1 and divide the number of scores "
            f"({scores.numel()}); samples of one group must be contiguous"
        )
    return scores.reshape(-1, group_size)


def check_groups(group_ids: Sequence[int], group_size: int) -> None:
    """Raise unless ``group_ids`` (one per sample, e.g. a rollout's ``prompt_index``) come in
    contiguous blocks of ``group_size`` equal ids, one block per id: the layout the grouped
    estimators and DAPO's dynamic sampling assume when they reshape ``[N] -> [N/n, n]``.

    >>> check_groups([7, 7, 3, 3], 2)
    >>> check_groups([7, 3, 7, 3], 2)
    Traceback (most recent call last):
    ...
    ValueError: samples 0..1 should all answer one prompt (contiguous groups of 2), got prompt ids
    [7, 3]; keep the n samples of each prompt next to each other
    """
    ids = [int(i) for i in group_ids]
    if group_size < 1 or len(ids) % group_size:
        raise ValueError(f"{len(ids)} samples do not split into groups of {group_size}")
    seen: dict[int, int] = {}
    for start in range(0, len(ids), group_size):
        block = ids[start : start + group_size]
        if any(i != block[0] for i in block):
            raise ValueError(
                f"samples {start}..{start + group_size - 1} should all answer one prompt "
                f"(contiguous groups of {group_size}), got prompt ids {block}; keep the n "
                "samples of each prompt next to each other"
            )
        if block[0] in seen:
            raise ValueError(
                f"prompt id {block[0]} fills two groups (samples from {seen[block[0]]} and "
                f"{start}); each prompt needs exactly {group_size} samples in one block"
            )
        seen[block[0]] = start


def broadcast_to_tokens(adv: Tensor, mask: Tensor) -> Tensor:
    """Outcome advantage ``[N]`` -> token advantage ``[N, T]``: ``A_{i,t} = A_i * m_{i,t}``."""
    return adv.unsqueeze(-1).to(mask.device) * mask.to(adv.dtype)


@estimator("gae", "value")
def gae(
    rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    gamma: float,
    lam: float,
    bootstrap_value: Tensor | None = None,
    dones: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over valid positions only.

    ``delta_t = r_t + gamma * (1 - d_t) * V_next - V_t`` and
    ``A_t = delta_t + gamma * lam * (1 - d_t) * A_next``, where ``V_next`` / ``A_next``
    belong to the next *valid* position of the same row (masked positions are skipped,
    so a value or reward written into padding changes nothing). After the last valid
    step ``V_next = bootstrap_value`` (``V(s_T)``, default 0) and ``A_next = 0``.
    ``dones[b, t] = 1`` ends the episode at step ``t``: nothing is bootstrapped across
    it, and the following position starts a new episode (auto-reset vector envs).
    ``returns = A + V`` is the critic's regression target; for PPO, whiten the
    advantages over the whole batch afterwards (:func:`whiten`).

    Why skip instead of zero-fill: with response masks (LLM) or env steps after the end
    of an episode, zero-filling would pull a bogus ``V = 0`` into the last valid delta.

    Args:
        rewards, values, mask: ``[B, T]``.
        gamma, lam: discount and GAE lambda (``lam=1`` -> Monte-Carlo, ``lam=0`` -> TD).
        bootstrap_value: ``[B]`` value of the state after the last step, or None for 0.
        dones: ``[B, T]`` episode-end flags (read at valid positions only), or None.

    Returns:
        ``(advantages, returns)``, both ``[B, T]`` and zero at masked positions.
    """
    if rewards.shape != values.shape or rewards.shape != mask.shape:
        raise ValueError(
            f"rewards {tuple(rewards.shape)}, values {tuple(values.shape)} and mask "
            f"{tuple(mask.shape)} must all be [B, T]"
        )
    valid = mask.bool()
    rewards, values = rewards.detach(), values.detach()
    batch, horizon = rewards.shape
    next_value = (
        torch.zeros(batch, dtype=values.dtype, device=values.device)
        if bootstrap_value is None
        else bootstrap_value.detach().to(values.dtype).reshape(batch)
    )
    next_adv = torch.zeros_like(next_value)
    adv = torch.zeros_like(values)
    for t in reversed(range(horizon)):
        nonterminal = 1.0 if dones is None else 1.0 - dones[:, t].to(values.dtype)
        delta = rewards[:, t] + gamma * nonterminal * next_value - values[:, t]
        a_t = delta + gamma * lam * nonterminal * next_adv
        v = valid[:, t]
        adv[:, t] = torch.where(v, a_t, torch.zeros_like(a_t))
        next_adv = torch.where(v, a_t, next_adv)
        next_value = torch.where(v, values[:, t], next_value)
    returns = torch.where(valid, adv + values, torch.zeros_like(adv))
    return adv, returns


@estimator("grpo", "outcome", grouped=True)
def grpo_advantages(
    scores: Tensor, group_size: int, normalize_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """Group-relative advantage: ``A_i = (s_i - mean_g) / (std_g + eps)`` per group ``g``.

    ``std_g`` is the unbiased (n-1) standard deviation. With ``normalize_std=False``
    this is Dr.GRPO's ``A_i = s_i - mean_g``: dividing by the std up-weights groups
    that are almost all right or all wrong, a difficulty bias Dr.GRPO removes.
    A group whose scores are all equal carries no learning signal and gets exactly
    0 (not ``0 / eps`` rounding noise, not NaN); groups of one sample also get 0.
    """
    grouped = _group(scores.detach().float(), group_size)
    mean = grouped.mean(dim=1, keepdim=True)
    centered = grouped - mean
    if normalize_std and group_size > 1:
        centered = centered / (grouped.std(dim=1, keepdim=True, unbiased=True) + eps)
    flat = (grouped == grouped[:, :1]).all(dim=1, keepdim=True)
    adv = torch.where(flat, torch.zeros_like(centered), centered)
    return adv.reshape(-1).to(scores.dtype)


@estimator("dr_grpo", "outcome", grouped=True)
def dr_grpo_advantages(scores: Tensor, group_size: int) -> Tensor:
    """Dr.GRPO: ``A_i = s_i - mean_g`` (no std division); pair it with the constant
    normaliser of ``seq-mean-token-sum-norm`` aggregation to drop the length bias too."""
    return grpo_advantages(scores, group_size, normalize_std=False)


@estimator("rloo", "outcome", grouped=True)
def rloo_advantages(scores: Tensor, group_size: int) -> Tensor:
    """REINFORCE leave-one-out: ``A_i = s_i - (sum_g - s_i) / (n - 1)``.

    The baseline excludes the sample itself, so it is independent of ``s_i`` and the
    gradient estimate stays unbiased. Equals ``n / (n - 1) * (s_i - mean_g)``.
    """
    if group_size < 2:
        raise ValueError(f"RLOO needs group_size >= 2 (leave-one-out), got {group_size}")
    grouped = _group(scores.detach().float(), group_size)
    baseline = (grouped.sum(dim=1, keepdim=True) - grouped) / (group_size - 1)
    return (grouped - baseline).reshape(-1).to(scores.dtype)


def whiten(
    x: Tensor, mask: Tensor | None = None, shift_mean: bool = True, eps: float = 1e-8
) -> Tensor:
    """Batch whitening ``(x - mean) / sqrt(var + eps)`` over valid entries.

    Mean and unbiased variance are taken over positions with ``mask = 1`` only; the
    output is 0 at masked positions. ``shift_mean=False`` rescales but adds the mean
    back, keeping the sign information of e.g. outcome rewards.
    """
    if mask is None:
        mask = torch.ones_like(x)
    m = mask.to(x.dtype)
    n = m.sum().clamp_min(1.0)
    mean = (x * m).sum() / n
    var = (((x - mean) * m) ** 2).sum() / (n - 1.0).clamp_min(1.0)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * m


def reinforce_pp_returns(token_rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """Discounted return-to-go ``G_t = r_t + gamma * G_{t+1}`` over valid positions.

    Token rewards usually hold the outcome score on the last valid token and the
    per-token KL penalty ``-beta * kl_t`` everywhere (see ``kl.kl_penalized_rewards``).
    Rewards at masked positions are ignored; the result is 0 there.
    """
    valid = mask.bool()
    rewards = torch.where(valid, token_rewards.detach(), torch.zeros_like(token_rewards))
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        running = torch.where(valid[:, t], rewards[:, t] + gamma * running, running)
        out[:, t] = running
    return out * mask.to(out.dtype)


@estimator("reinforce_pp", "token")
def reinforce_pp_advantages(token_rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """REINFORCE++: ``A = whiten(G)`` with ``G`` the discounted token return-to-go.

    Global batch whitening replaces a critic: it centres and scales the returns across
    all prompts, which stabilises PPO-style updates without a learned baseline.
    """
    return whiten(reinforce_pp_returns(token_rewards, mask, gamma), mask)


def _last_valid_onehot(mask: Tensor) -> Tensor:
    """``[B, T]`` one-hot of each row's last valid position (all-zero for empty rows)."""
    valid = mask.bool()
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(valid)
    last = torch.where(valid, positions, torch.full_like(positions, -1)).amax(dim=1)
    return (positions == last.unsqueeze(1)) & valid


@estimator("reinforce_pp_baseline", "token", grouped=True)
def reinforce_pp_baseline_advantages(
    scores: Tensor,
    mask: Tensor,
    group_size: int,
    token_rewards: Tensor | None = None,
    gamma: float = 1.0,
) -> Tensor:
    """REINFORCE++-baseline: subtract the group mean, then REINFORCE++.

    ``s'_i = s_i - mean_g``; ``s'_i`` is placed on the last valid token, optional
    per-token rewards (KL penalty) are added, the return-to-go is taken and whitened
    over the batch. With ``gamma = 1`` and no token rewards every token of sample ``i``
    gets ``whiten(s'_i)``. The group mean removes prompt difficulty; whitening fixes
    the scale across the batch.
    """
    centered = grpo_advantages(scores, group_size, normalize_std=False)
    rewards = _last_valid_onehot(mask).to(centered.dtype) * centered.unsqueeze(1)
    if token_rewards is not None:
        rewards = rewards + token_rewards.detach().to(rewards.dtype)
    return whiten(reinforce_pp_returns(rewards, mask, gamma), mask)


def compute_advantages(name: str | AdvantageEstimator, **inputs: Any) -> Any:
    """Call the estimator ``name`` (or a resolved spec) with the subset of ``inputs`` it accepts.

    Lets a runner hand every tensor and config value it has (``scores=..., mask=...,
    rewards=..., values=..., gamma=..., group_size=...``) to whichever estimator the
    config names; missing required arguments raise a TypeError naming them.
    """
    spec = name if isinstance(name, AdvantageEstimator) else ADVANTAGES.get(name)
    fn, name = spec.fn, spec.name
    params = inspect.signature(fn).parameters
    accepted = {k: v for k, v in inputs.items() if k in params}
    missing = [
        p.name
        for p in params.values()
        if p.default is inspect.Parameter.empty and p.name not in accepted
    ]
    if missing:
        raise TypeError(f"advantage estimator {name!r} needs {missing}; got {sorted(inputs)}")
    return fn(**accepted)
