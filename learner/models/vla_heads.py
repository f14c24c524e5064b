"""The small VLA's two action heads and their distributions (``learner.models.policy`` protocol).

**Tokens** (OpenVLA-style): every action dimension of every chunk step is one token over
``n_bins`` (256) uniform bins of [-1, 1]; the action's log-prob is the sum of its tokens'
log-probs (:meth:`TokenDistribution.token_log_prob` gives them one by one). SFT is token
cross-entropy, i.e. ``-log_prob``.

**Flow** (pi0-style action expert): a velocity field ``v(x, t | features)`` carries Gaussian
noise ``x_0`` to an action chunk ``x_K`` in ``K`` Euler steps; SFT is conditional flow matching
(``x_t = (1 - t) x_0 + t a``, target ``a - x_0``). For RL, noise is injected into the sampling
ODE, as flow-policy RL methods do (ReinFlow, Flow-GRPO): every Euler step becomes an
Euler-Maruyama transition ``x_{k+1} ~ N(x_k + v dt, sigma^2 dt)`` with a learned per-dimension
``sigma``, and the log-prob of the sample is the sum of the ``K`` Gaussian transition log-probs
(``x_0``'s density has no parameters and cancels in every ratio). That needs the whole chain,
so a sampled flow action carries it as *latent columns*: ``[B, chunk, A * (K + 1)]`` = final
action ``x_K`` then ``x_0 .. x_{K-1}``. The env executes the first ``A`` columns
(:func:`learner.models.policy.executable`); PPO hands the whole row back to ``log_prob``.
The deterministic ``mode`` starts from ``x_0 = 0`` without injected noise.

Where a sampled chain starts (``x0``): ``gaussian`` draws ``x_0 ~ N(0, I)`` as flow matching
does, so a sample spreads over everything the demonstrations did; ``zero`` starts it at the
mode's ``x_0 = 0``, so the only exploration is the injected noise around the deterministic
chain. RL on ``gaussian`` samples mostly learns to make the action insensitive to ``x_0`` -- a
gain the deterministic eval, which never draws ``x_0``, does not see; on ``zero`` samples every
update moves the chain the eval runs.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from learner.algorithms.distributions import ActionBins
from learner.models.distributions import ChunkBinned

_LOG_2PI = math.log(2.0 * math.pi)
FLOW_X0 = ("gaussian", "zero")


class TokenDistribution(ChunkBinned):
    """:class:`ChunkBinned` over 256 bins plus per-token log-probs ``[B, chunk, A]``."""

    def token_log_prob(self, actions: Tensor) -> Tensor:
        return self._d.log_prob(self.bins.encode(actions))

    def sft_loss(self, actions: Tensor) -> Tensor:
        """Mean token cross-entropy of demonstrated actions ``[B, chunk, A]``."""
        return -self.token_log_prob(actions).mean()


class TokenHead(nn.Module):
    """Features ``[B, F]`` -> token logits ``[B, chunk, A, n_bins]``."""

    def __init__(
        self,
        feat_dim: int,
        action_dim: int,
        chunk: int,
        n_bins: int = 256,
        temperature: float = 1.0,
    ) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"model.kwargs.token_temperature must be > 0, got {temperature}")
        self.chunk, self.action_dim, self.bins = chunk, action_dim, ActionBins(n_bins)
        # logits / temperature in every forward (rollout sampling and the PPO ratio alike, so the
        # log-probs stay those of the policy that acted); the mode (argmax) does not move, so an
        # RL config can sharpen an SFT checkpoint's sampled policy without changing its eval
        self.temperature = float(temperature)
        self.logits = nn.Linear(feat_dim, chunk * action_dim * n_bins)
        nn.init.normal_(self.logits.weight, std=0.01)
        nn.init.zeros_(self.logits.bias)

    def forward(self, feat: Tensor) -> TokenDistribution:
        logits = self.logits(feat).view(-1, self.chunk, self.action_dim, self.bins.n_bins)
        return TokenDistribution(logits / self.temperature, self.bins)


class FlowExpert(nn.Module):
    """Velocity field ``v(x_t, t | feat)`` over a flattened chunk ``[B, chunk * A]``."""

    def __init__(
        self,
        feat_dim: int,
        action_dim: int,
        chunk: int,
        hidden: int = 256,
        steps: int = 4,
        init_log_sigma: float = math.log(0.3),
        x0: str = "gaussian",
    ) -> None:
        super().__init__()
        if steps < 1:
            raise ValueError(f"flow_steps must be >= 1, got {steps}")
        if x0 not in FLOW_X0:
            raise ValueError(f"model.kwargs.flow_x0={x0!r}: use one of {FLOW_X0}")
        self.chunk, self.action_dim, self.steps, self.x0 = chunk, action_dim, steps, x0
        n = chunk * action_dim
        self.net = nn.Sequential(
            nn.Linear(feat_dim + n + 16, hidden),
            nn.SiLU(),
            nn.Linear(hidden, hidden),
            nn.SiLU(),
            nn.Linear(hidden, n),
        )
        self.log_sigma = nn.Parameter(torch.full((n,), float(init_log_sigma)))
        self.register_buffer("freqs", torch.exp(torch.linspace(0.0, math.log(100.0), 8)))

    def velocity(self, x: Tensor, t: Tensor, feat: Tensor) -> Tensor:
        emb = t[:, None] * self.freqs[None]
        return self.net(torch.cat([feat, x, torch.sin(emb), torch.cos(emb)], dim=-1))

    def sft_loss(self, feat: Tensor, actions: Tensor) -> Tensor:
        """Conditional flow matching on demonstrated chunks ``[B, chunk, A]``."""
        a = actions.reshape(actions.shape[0], -1)
        x0 = torch.randn_like(a)
        t = torch.rand(a.shape[0], device=a.device)
        xt = (1.0 - t[:, None]) * x0 + t[:, None] * a
        return (self.velocity(xt, t, feat) - (a - x0)).square().mean()

    def forward(self, feat: Tensor) -> FlowDistribution:
        return FlowDistribution(self, feat)


class FlowDistribution:
    """Noise-injected Euler-Maruyama sampling of the flow expert; see the module docstring."""

    def __init__(self, expert: FlowExpert, feat: Tensor) -> None:
        self.expert, self.feat = expert, feat
        self.k, self.dt = expert.steps, 1.0 / expert.steps
        self.sigma = expert.log_sigma.clamp(-5.0, 1.0).exp()
        self.shape = (feat.shape[0], expert.chunk, expert.action_dim)

    def _means(self, chain: Tensor) -> Tensor:
        """Transition means ``[B, K, n]`` of chain states ``x_0 .. x_{K-1}`` ``[B, K, n]``."""
        b, k, n = chain.shape
        t = (torch.arange(k, dtype=chain.dtype, device=chain.device) * self.dt).repeat(b)
        feat = self.feat.repeat_interleave(k, dim=0)
        v = self.expert.velocity(chain.reshape(b * k, n), t, feat).view(b, k, n)
        return chain + v * self.dt

    def _pack(self, final: Tensor, chain: Tensor) -> Tensor:
        b, c, a = self.shape
        return torch.cat(
            [
                final.view(b, c, a),
                chain.view(b, self.k, c, a).permute(0, 2, 1, 3).reshape(b, c, self.k * a),
            ],
            dim=-1,
        )

    def _unpack(self, actions: Tensor) -> tuple[Tensor, Tensor]:
        b, c, a = self.shape
        if actions.shape[-1] != a * (self.k + 1):
            raise ValueError(
                f"flow log_prob needs sampled actions with their denoising chain "
                f"[B, {c}, {a * (self.k + 1)}] (from sample()), got {tuple(actions.shape)}"
            )
        final = actions[..., :a].reshape(b, c * a)
        chain = (
            actions[..., a:].reshape(b, c, self.k, a).permute(0, 2, 1, 3).reshape(b, self.k, c * a)
        )
        return final, chain

    def sample(self) -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            b, c, a = self.shape
            x = (torch.zeros if self.expert.x0 == "zero" else torch.randn)(
                b, c * a, device=self.feat.device
            )
            states, std = [], self.sigma * math.sqrt(self.dt)
            for k in range(self.k):
                states.append(x)
                t = torch.full((b,), k * self.dt, device=x.device)
                x = x + self.expert.velocity(x, t, self.feat) * self.dt + std * torch.randn_like(x)
            packed = self._pack(x, torch.stack(states, dim=1))
            return packed, self.log_prob(packed)

    def log_prob(self, actions: Tensor) -> Tensor:
        if actions.shape[-1] == self.shape[2]:
            return self._action_only_log_prob(actions)
        final, chain = self._unpack(actions)
        nxt = torch.cat([chain[:, 1:], final[:, None]], dim=1)  # x_1 .. x_K
        std = self.sigma * math.sqrt(self.dt)
        z = (nxt - self._means(chain)) / std
        return (-0.5 * z.square() - torch.log(std) - 0.5 * _LOG_2PI).sum(dim=(1, 2))

    def _action_only_log_prob(self, actions: Tensor) -> Tensor:
        """For an action without its chain (deterministic acting, serving): the last transition's
        Gaussian around the noise-free chain from ``x_0 = 0``. Never a PPO ratio: those get
        chains."""
        b, c, a = self.shape
        x = torch.zeros(b, c * a, device=self.feat.device)
        for k in range(self.k - 1):
            t = torch.full((b,), k * self.dt, device=x.device)
            x = x + self.expert.velocity(x, t, self.feat) * self.dt
        last = torch.full((b,), (self.k - 1) * self.dt, device=x.device)
        mean = x + self.expert.velocity(x, last, self.feat) * self.dt
        std = self.sigma * math.sqrt(self.dt)
        z = (actions.reshape(b, c * a) - mean) / std
        return (-0.5 * z.square() - torch.log(std) - 0.5 * _LOG_2PI).sum(dim=-1)

    def mode(self) -> Tensor:
        with torch.no_grad():
            b, c, a = self.shape
            x = torch.zeros(b, c * a, device=self.feat.device)
            for k in range(self.k):
                t = torch.full((b,), k * self.dt, device=x.device)
                x = x + self.expert.velocity(x, t, self.feat) * self.dt
            return x.view(b, c, a).clamp(-1.0, 1.0)

    def entropy(self) -> Tensor:
        """Entropy of the injected noise (all K transitions), the exploration it buys."""
        per_dim = torch.log(self.sigma * math.sqrt(self.dt)) + 0.5 * (_LOG_2PI + 1.0)
        return (per_dim.sum() * self.k).expand(self.shape[0])
