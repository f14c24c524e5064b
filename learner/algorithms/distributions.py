"""Action distributions of embodied policies: tanh-Gaussian, binned actions, action chunks.

Actions live in ``[-1, 1]^A`` (the normalised action space of every env in this project).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

_LOG_2PI = math.log(2.0 * math.pi)


def log1m_tanh_sq(u: Tensor) -> Tensor:
    """Stable ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`` (no 0 inside a log)."""
    return 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))


class TanhGaussian:
    """Diagonal Gaussian in pre-squash space ``u ~ N(mean, std^2)``, action ``a = tanh(u)``.

    Change of variables: ``log pi(a) = sum_i [log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2)]``;
    without the correction the density ignores the squashing and SAC's entropy term
    is wrong near the bounds. ``log_std`` is clamped to ``[log_std_min, log_std_max]``.
    Log-probs are summed over the last (action) dim.
    """

    def __init__(
        self,
        mean: Tensor,
        log_std: Tensor,
        log_std_min: float = -20.0,
        log_std_max: float = 2.0,
    ) -> None:
        self.mean = mean
        self.log_std = torch.clamp(log_std, log_std_min, log_std_max).expand_as(mean)
        self.std = self.log_std.exp()

    def _log_prob_u(self, u: Tensor) -> Tensor:
        z = (u - self.mean) / self.std
        normal = -0.5 * z.square() - self.log_std - 0.5 * _LOG_2PI
        return (normal - log1m_tanh_sq(u)).sum(dim=-1)

    def rsample(self) -> tuple[Tensor, Tensor]:
        """Reparameterised sample: ``(a, log pi(a))``; gradients flow to mean and log_std.

        The Gaussian term uses the drawn noise ``eps = (u - mean) / std`` itself rather than
        recomputing it from ``u``: the same value (its gradient through ``u`` and ``mean``
        cancels exactly), two kernels and their backward fewer on the SAC update's hot path.
        """
        eps = torch.randn_like(self.mean)
        u = self.mean + self.std * eps
        normal = -0.5 * eps.square() - self.log_std - 0.5 * _LOG_2PI
        return torch.tanh(u), (normal - log1m_tanh_sq(u)).sum(dim=-1)

    def sample(self) -> tuple[Tensor, Tensor]:
        """Sample without gradient: ``(a, log pi(a))``."""
        with torch.no_grad():
            return self.rsample()

    def log_prob(self, action: Tensor, eps: float = 1e-6) -> Tensor:
        """``log pi(a)`` of given actions; ``a`` is clipped to ``±(1 - eps)`` before atanh."""
        a = torch.clamp(action, -1.0 + eps, 1.0 - eps)
        return self._log_prob_u(torch.atanh(a))

    def mode(self) -> Tensor:
        """Deterministic action ``tanh(mean)`` for evaluation."""
        return torch.tanh(self.mean)

    def entropy_estimate(self, n_samples: int = 1) -> Tensor:
        """Monte-Carlo entropy ``-mean_k log pi(a_k)`` (no closed form after the tanh)."""
        return -torch.stack([self.rsample()[1] for _ in range(n_samples)]).mean(dim=0)


class ActionBins:
    """Uniform discretisation of ``[low, high]`` into ``n_bins`` bins (OpenVLA: 256 over [-1, 1]).

    ``encode(a) = clamp(floor((a - low) / w), 0, n_bins - 1)`` with ``w = (high - low) / n_bins``,
    ``decode(i) = low + (i + 0.5) w`` (the bin centre, so the round-trip error is <= w / 2).
    ``to_tokens`` maps bin ids onto the last ``n_bins`` ids of a vocabulary, as OpenVLA
    overwrites the least used tokens of the LM vocabulary with action tokens.
    """

    def __init__(self, n_bins: int = 256, low: float = -1.0, high: float = 1.0) -> None:
        if n_bins < 2 or not high > low:
            raise ValueError(f"need n_bins >= 2 and high > low, got {n_bins}, [{low}, {high}]")
        self.n_bins, self.low, self.high = n_bins, float(low), float(high)
        self.width = (self.high - self.low) / n_bins

    def encode(self, actions: Tensor) -> Tensor:
        """Continuous actions -> int64 bin ids (values outside [low, high] are clipped)."""
        ids = torch.floor((actions.to(torch.float64) - self.low) / self.width)
        return torch.clamp(ids, 0, self.n_bins - 1).to(torch.int64)

    def decode(self, ids: Tensor) -> Tensor:
        """Bin ids -> bin-centre actions (float32)."""
        return (self.low + (ids.to(torch.float64) + 0.5) * self.width).to(torch.float32)

    def to_tokens(self, ids: Tensor, vocab_size: int) -> Tensor:
        """Bin id ``i`` -> token id ``vocab_size - n_bins + i`` (the last ``n_bins`` ids)."""
        return ids + (vocab_size - self.n_bins)

    def from_tokens(self, tokens: Tensor, vocab_size: int) -> Tensor:
        """Inverse of :meth:`to_tokens`, clamped into ``[0, n_bins)``."""
        return torch.clamp(tokens - (vocab_size - self.n_bins), 0, self.n_bins - 1)


class BinnedCategorical:
    """Independent categorical per action dimension over bins: ``logits [..., A, n_bins]``.

    ``log_prob`` returns per-dimension log-probs ``[..., A]`` (sum them, or use
    :func:`chunk_log_prob`, for the joint log-prob of the action vector).
    """

    def __init__(self, logits: Tensor) -> None:
        self.logits = logits
        self.log_probs = torch.log_softmax(logits.float(), dim=-1)

    def log_prob(self, ids: Tensor) -> Tensor:
        return self.log_probs.gather(-1, ids.unsqueeze(-1).long()).squeeze(-1)

    def sample(self, generator: torch.Generator | None = None) -> Tensor:
        probs = self.log_probs.exp().reshape(-1, self.log_probs.shape[-1])
        ids = torch.multinomial(probs, 1, generator=generator)
        return ids.reshape(self.log_probs.shape[:-1])

    def mode(self) -> Tensor:
        return self.log_probs.argmax(dim=-1)

    def entropy(self) -> Tensor:
        return -(self.log_probs.exp() * self.log_probs).sum(dim=-1)


def chunk_log_prob(logp: Tensor, reduce: str = "chunk", mask: Tensor | None = None) -> Tensor:
    """Reduce per-dimension log-probs of an action chunk ``[B, chunk, A]``.

    ``reduce="action"`` -> ``[B, chunk]``: one log-prob per executed action
    (``sum_a``), for a PPO ratio per env step. ``reduce="chunk"`` -> ``[B]``: the
    log-prob of the whole chunk (``sum_{k,a}``), for one ratio per policy query.
    ``mask [B, chunk]`` zeroes actions never executed (the episode ended mid-chunk).
    """
    if logp.dim() != 3:
        raise ValueError(f"logp must be [B, chunk, A], got shape {tuple(logp.shape)}")
    per_action = logp.sum(dim=-1)
    if mask is not None:
        per_action = per_action * mask.to(per_action.dtype)
    if reduce == "action":
        return per_action
    if reduce == "chunk":
        return per_action.sum(dim=-1)
    raise ValueError(f"reduce must be 'action' or 'chunk', got {reduce!r}")
