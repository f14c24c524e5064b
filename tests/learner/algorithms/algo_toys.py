"""A tiny batched control task for the learning checks: drive a 1-D point mass to the origin.

``s' = clip(s + 0.25 a, -2, 2)``, ``a in [-1, 1]``, reward ``-|s'|``, 10 steps,
``s_0 ~ U(-1.5, 1.5)``.
Doing nothing scores about -7.2 per episode, uniform random actions -7.7, the bang-bang
expert (:func:`expert_action`) -1.1.
"""

from __future__ import annotations

import torch
from torch import Tensor

HORIZON = 10
STEP = 0.25


def reset(n: int, generator: torch.Generator | None = None) -> Tensor:
    return torch.rand(n, 1, generator=generator) * 3.0 - 1.5


def step(state: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
    nxt = torch.clamp(state + STEP * torch.clamp(action, -1.0, 1.0), -2.0, 2.0)
    return nxt, -nxt.abs().squeeze(-1)


def expert_action(state: Tensor) -> Tensor:
    """Bang-bang towards 0, exact on the last partial step."""
    return torch.clamp(-state / STEP, -1.0, 1.0)


@torch.no_grad()
def evaluate(policy, n: int = 256, seed: int = 123) -> float:
    """Mean undiscounted return of ``policy(state) -> action`` over ``n`` fixed start states."""
    gen = torch.Generator().manual_seed(seed)
    state = reset(n, gen)
    total = torch.zeros(n)
    for _ in range(HORIZON):
        state, reward = step(state, policy(state))
        total += reward
    return float(total.mean())


class TanhGaussianActor(torch.nn.Module):
    """Small MLP ``obs -> TanhGaussian`` for the off-policy checks."""

    def __init__(self, obs_dim: int = 1, act_dim: int = 1, hidden: int = 64) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(obs_dim, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, 2 * act_dim),
        )

    def forward(self, obs: Tensor):
        from learner.algorithms.distributions import TanhGaussian

        mean, log_std = self.net(obs).chunk(2, dim=-1)
        return TanhGaussian(mean, torch.clamp(log_std, -5.0, 2.0))
