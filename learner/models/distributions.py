"""Action-chunk distributions that satisfy ``learner.models.policy.ActionDistribution``.

The math lives in ``learner.algorithms.distributions`` (tanh-Gaussian, bins); these thin
wrappers give every head the same chunk-level interface: actions ``[B, chunk, A]``, one
log-prob per sample ``[B]`` (summed over chunk and action dims), an entropy ``[B]``.
Why a per-sample log-prob: PPO takes one ratio per policy query, and a chunk is one query.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from learner.algorithms.distributions import ActionBins, BinnedCategorical, TanhGaussian

_HALF_LOG_2PIE = 0.5 * math.log(2.0 * math.pi * math.e)


class ChunkGaussian:
    """Plain diagonal Gaussian over ``[B, chunk, A]``; the env clips samples to [-1, 1].

    Why keep an unsquashed head: for PPO on continuous control it often learns faster than a
    tanh-Gaussian (no vanishing gradients near the bounds); the log-prob is of the raw sample,
    which is what the trajectory stores, so clipping in the env does not bias the ratio.
    """

    def __init__(self, mean: Tensor, log_std: Tensor) -> None:
        self.mean = mean
        self.log_std = log_std.expand_as(mean)
        self.std = self.log_std.exp()

    def sample(self) -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            a = self.mean + self.std * torch.randn_like(self.mean)
            return a, self.log_prob(a)

    def log_prob(self, actions: Tensor) -> Tensor:
        z = (actions - self.mean) / self.std
        per_dim = -0.5 * z.square() - self.log_std - 0.5 * math.log(2.0 * math.pi)
        return per_dim.flatten(1).sum(-1)

    def mode(self) -> Tensor:
        return self.mean.clamp(-1.0, 1.0)

    def entropy(self) -> Tensor:
        return (self.log_std + _HALF_LOG_2PIE).flatten(1).sum(-1)


class ChunkTanhGaussian:
    """Tanh-squashed Gaussian over ``[B, chunk, A]`` (actions strictly inside (-1, 1))."""

    def __init__(self, mean: Tensor, log_std: Tensor) -> None:
        self._d = TanhGaussian(mean, log_std.expand_as(mean), log_std_min=-5.0, log_std_max=1.0)

    def sample(self) -> tuple[Tensor, Tensor]:
        a, logp = self._d.sample()  # logp [B, chunk]
        return a, logp.flatten(1).sum(-1)

    def log_prob(self, actions: Tensor) -> Tensor:
        return self._d.log_prob(actions).flatten(1).sum(-1)

    def mode(self) -> Tensor:
        return self._d.mode()

    def entropy(self) -> Tensor:
        """Entropy of the pre-squash Gaussian: a smooth, sample-free proxy used as a bonus."""
        return (self._d.log_std + _HALF_LOG_2PIE).flatten(1).sum(-1)


class ChunkBinned:
    """Independent categorical over ``n_bins`` per action dim; actions are bin centres."""

    def __init__(self, logits: Tensor, bins: ActionBins) -> None:
        self._d = BinnedCategorical(logits)  # logits [B, chunk, A, n_bins]
        self.bins = bins

    def sample(self) -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            ids = self._d.sample()
            return self.bins.decode(ids), self._d.log_prob(ids).flatten(1).sum(-1)

    def log_prob(self, actions: Tensor) -> Tensor:
        return self._d.log_prob(self.bins.encode(actions)).flatten(1).sum(-1)

    def mode(self) -> Tensor:
        return self.bins.decode(self._d.mode())

    def entropy(self) -> Tensor:
        return self._d.entropy().flatten(1).sum(-1)
