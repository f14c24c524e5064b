"""Implicit Q-learning (Kostrikov et al. 2021): offline RL without querying unseen actions.

The value ``V(s)`` is fit to an upper *expectile* of ``Q(s, a)`` over dataset actions, so
it approximates ``max_a Q`` within the data's support; ``Q`` is regressed onto
``r + gamma V(s')`` (no ``a' ~ pi`` ever enters a target); the actor is extracted by
advantage-weighted regression (AWR) on dataset actions.
"""

from __future__ import annotations

import torch
from torch import Tensor


def expectile_loss(diff: Tensor, tau: float) -> Tensor:
    """Asymmetric squared loss ``|tau - 1(u < 0)| u^2`` elementwise (not reduced).

    With ``tau > 0.5`` positive residuals ``u`` (Q above V) weigh ``tau`` and negative ones
    ``1 - tau``, so the minimiser is the ``tau``-expectile: ``tau = 0.5`` is the mean,
    ``tau -> 1`` approaches the maximum.
    """
    if not 0.0 < tau < 1.0:
        raise ValueError(f"expectile tau must be in (0, 1), got {tau}")
    weight = torch.where(diff < 0, 1.0 - tau, tau)
    return weight * diff.square()


def iql_value_loss(q: Tensor, v: Tensor, tau: float = 0.7) -> Tensor:
    """``mean_b |tau - 1(u<0)| u^2`` with ``u = min_j Q_j(s, a) - V(s)``; ``q`` is ``[E, B]``
    or ``[B]`` from the *target* critics (no gradient into Q)."""
    q_min = q.min(dim=0).values if q.dim() == 2 else q
    return expectile_loss(q_min.detach() - v, tau).mean()


def iql_q_target(reward: Tensor, done: Tensor, next_v: Tensor, gamma: float) -> Tensor:
    """``y = r + gamma (1 - d) V(s')`` (detached)."""
    return (reward + gamma * (1.0 - done.to(reward.dtype)) * next_v).detach()


def iql_q_loss(q_pred: Tensor, target: Tensor) -> Tensor:
    """``sum_j 0.5 mean_b (Q_j(s, a) - y)^2`` over ensemble members ``q_pred [E, B]``."""
    if q_pred.dim() == 1:
        q_pred = q_pred.unsqueeze(0)
    return 0.5 * (q_pred - target.detach().unsqueeze(0)).square().mean(dim=-1).sum()


def awr_weights(q: Tensor, v: Tensor, beta: float, max_weight: float = 100.0) -> Tensor:
    """``w = min(exp(beta (Q - V)), max_weight)``, detached; ``q`` may be ``[E, B]`` (min taken).

    The clamp keeps a few large advantages from dominating the regression (and from
    overflowing ``exp``).
    """
    q_min = q.min(dim=0).values if q.dim() == 2 else q
    return torch.clamp(torch.exp(beta * (q_min - v).detach()), max=max_weight)


def awr_actor_loss(logp: Tensor, weights: Tensor) -> Tensor:
    """``-mean_b w_b log pi(a_b | s_b)`` on dataset actions: weighted behaviour cloning."""
    return -(weights.detach() * logp).mean()
