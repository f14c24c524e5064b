"""Flow matching as openpi does it, plus RTC guided inpainting and log-probs by noise injection.

Convention (π0 / π0.5 in openpi, restated): time runs from ``t = 1`` (pure noise) to ``t = 0``
(actions); ``x_t = t * noise + (1 - t) * actions`` and the network predicts the velocity
``u = noise - actions``; training draws ``t ~ Beta(1.5, 1) * 0.999 + 0.001``; sampling is
``steps`` Euler steps of ``dt = -1 / steps`` (10 in openpi). The denoised estimate at any
``t`` is therefore ``x_t - t * u``.

RTC guidance (Black et al. 2025), written in this convention: the committed prefix ``Y`` (the
rows the robot executes while this chunk is computed, padded) is inpainted by adding to the
velocity the vector-Jacobian product of the weighted error ``W (Y - x̂)`` through the denoised
estimate ``x̂``; ``W`` is 1 on the first ``delay`` rows, decays as ``c (e^c - 1)/(e - 1)`` until
``H - execute_horizon`` and is 0 after; the guidance weight is
``min(β, t / ((1 - t) r²))`` with ``r² = t² / (t² + (1 - t)²)`` (β = 5 in the paper).

Log-probs for RL (as flow-policy RL methods do): each Euler step gets Gaussian noise
``sigma * sqrt(|dt|)``; the chain ``x_1 → … → x_0`` is then a product of Gaussians whose
log-density under the current weights :func:`chain_log_prob` recomputes for a PPO ratio.

>>> [round(v, 3) for v in rtc_weights(6, delay=2, execute_horizon=2).tolist()]
[1.0, 1.0, 0.368, 0.077, 0.0, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

Velocity = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x_t [B,H,A], t [B]) -> u [B,H,A]


def flow_targets(
    actions: torch.Tensor, noise: torch.Tensor, t: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x_t, u_t) for a training step at times ``t`` [B]."""
    tt = t.view(-1, *([1] * (actions.dim() - 1)))
    return tt * noise + (1.0 - tt) * actions, noise - actions


def sample_time(batch: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Training times ``Beta(1.5, 1) * 0.999 + 0.001`` (more weight near the noisy end)."""
    # Beta(a, 1) by inversion: F^-1(u) = u^(1/a)
    u = torch.rand(batch, generator=generator)
    return u.pow(1.0 / 1.5) * 0.999 + 0.001


def rtc_weights(horizon: int, delay: int, execute_horizon: int) -> torch.Tensor:
    """RTC's soft mask over a chunk of ``horizon`` rows."""
    i = torch.arange(horizon, dtype=torch.float64)
    end = horizon - execute_horizon
    c = (end - i) / max(end - delay + 1, 1)
    soft = c * (torch.exp(c) - 1.0) / (math.e - 1.0)
    w = torch.where(i < delay, torch.ones_like(i), torch.where(i < end, soft, torch.zeros_like(i)))
    return w.clamp(0.0, 1.0)


@dataclass
class FlowSample:
    actions: torch.Tensor  # [B, H, A] (x at t = 0)
    chain: torch.Tensor  # [B, steps + 1, H, A], x_1 (noise) first
    log_prob: torch.Tensor  # [B] log-density of the chain's transitions (0 when sigma = 0)


def _guided(
    velocity: Velocity,
    x: torch.Tensor,
    t: torch.Tensor,
    prefix: torch.Tensor,
    w: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    with torch.enable_grad():
        xg = x.detach().requires_grad_(True)
        u = velocity(xg, t)
        denoised = xg - t.view(-1, 1, 1) * u
        err = (prefix - denoised) * w.view(1, -1, 1)
        (g,) = torch.autograd.grad(denoised, xg, grad_outputs=err.detach())
    tt = float(t[0])
    if tt >= 1.0 - 1e-9:
        scale = beta
    else:
        r2 = tt * tt / (tt * tt + (1.0 - tt) ** 2)
        scale = min(beta, tt / ((1.0 - tt) * r2)) if tt > 0 else 0.0
    return u.detach() - scale * g


def sample(
    velocity: Velocity,
    noise: torch.Tensor,
    steps: int = 10,
    sigma: float = 0.0,
    prefix: torch.Tensor | None = None,
    delay: int = 0,
    execute_horizon: int = 1,
    max_guidance: float = 5.0,
    generator: torch.Generator | None = None,
) -> FlowSample:
    """Euler-integrate from ``noise`` (t = 1) to actions (t = 0); optionally noisy and RTC-guided.

    ``prefix`` [B, P, A] with ``P <= H``: the committed rows to inpaint (rows past ``P`` are free).
    """
    x = noise
    b, h, a = noise.shape
    dt = -1.0 / steps
    chain, logp = [x], torch.zeros(b, dtype=torch.float32, device=noise.device)
    if prefix is not None:
        p = min(prefix.shape[1], h)
        padded = torch.zeros_like(noise)
        padded[:, :p] = prefix[:, :p].to(noise)
        w = rtc_weights(h, min(delay, p), execute_horizon).to(noise)
        w[p:] = 0.0
    for k in range(steps):
        t = torch.full((b,), 1.0 + k * dt, dtype=noise.dtype, device=noise.device)
        if prefix is None:
            with torch.no_grad():
                u = velocity(x, t)
        else:
            u = _guided(velocity, x, t, padded, w, max_guidance)
        mean = x + dt * u
        if sigma > 0:
            std = sigma * math.sqrt(-dt)
            x = mean + std * torch.randn(mean.shape, generator=generator).to(
                mean
            )  # CPU generator, any device
            logp = logp + _gauss_logp(x, mean, std)
        else:
            x = mean
        chain.append(x)
    return FlowSample(x, torch.stack(chain, 1), logp)


def _gauss_logp(x: torch.Tensor, mean: torch.Tensor, std: float) -> torch.Tensor:
    z = (x.float() - mean.float()) / std  # float32 even for bf16 models: a sum over many terms
    return (-0.5 * z.pow(2) - math.log(std) - 0.5 * math.log(2 * math.pi)).flatten(1).sum(-1)


def chain_log_prob(velocity: Velocity, chain: torch.Tensor, sigma: float) -> torch.Tensor:
    """[B] log-density of a stored chain under ``velocity`` (differentiable: the PPO numerator)."""
    if sigma <= 0:
        raise ValueError("chain_log_prob needs sigma > 0 (a deterministic chain has no density)")
    b, n = chain.shape[:2]
    steps = n - 1
    dt = -1.0 / steps
    std = sigma * math.sqrt(-dt)
    total = torch.zeros(b, dtype=torch.float32, device=chain.device)
    for k in range(steps):
        t = torch.full((b,), 1.0 + k * dt, dtype=chain.dtype, device=chain.device)
        mean = chain[:, k] + dt * velocity(chain[:, k], t)
        total = total + _gauss_logp(chain[:, k + 1], mean, std)
    return total
