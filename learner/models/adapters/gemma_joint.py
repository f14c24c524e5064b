"""π0's two-transformer mixture: PaliGemma's Gemma on the prefix, the action expert on the suffix.

Why hand-written layers over ``transformers`` modules: in π0 both Gemmas share every attention
layer (the expert's queries see the VLM's keys and values; widths may differ, heads and head
size must match), which no stock ``forward`` does. We call the stock sub-modules (projections,
RMSNorms, MLPs) so the parameter names stay the checkpoints', and do the attention here. The
prefix (images + prompt) never attends to the suffix, so it runs once and its keys / values
are reused by every denoising step (:func:`prefix_pass`, then :func:`suffix_pass`).

π0.5's expert conditions its RMSNorms on the flow time (adaRMS: ``dense`` maps the condition
to scale, shift and a residual gate); :class:`AdaRMSNorm` replaces the expert's norms.
"""

from __future__ import annotations

import torch
from torch import nn


class AdaRMSNorm(nn.Module):
    """RMSNorm whose scale / shift / gate come from a condition vector (π0.5's action expert)."""

    def __init__(self, dim: int, cond_dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        # random init, not DiT's zeros: a zero gate would make an untrained expert the identity (no
        # gradient reaches its LoRA); a released checkpoint overwrites these weights anyway
        self.dense = nn.Linear(cond_dim, 3 * dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        normed = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype)
        scale, shift, gate = self.dense(cond)[:, None].chunk(3, -1)
        return normed * (1.0 + scale) + shift, gate


def _norm(
    norm: nn.Module, x: torch.Tensor, cond: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    if isinstance(norm, AdaRMSNorm):
        return norm(x, cond)  # type: ignore[arg-type]  # adaRMS layers always get cond
    return norm(x), None


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Rotary embedding of ``x`` [B, heads, L, hd] at positions ``pos`` [B, L] (rotate-half
    form)."""
    hd = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float32, device=x.device) / hd)
    freqs = pos.float()[..., None] * inv
    cos, sin = (
        torch.cat([freqs, freqs], -1).cos()[:, None],
        torch.cat([freqs, freqs], -1).sin()[:, None],
    )
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return (x * cos + torch.cat([-x2, x1], -1) * sin).to(x.dtype)


def _qkv(
    layer: nn.Module, h: torch.Tensor, heads: int, kv_heads: int, hd: int, pos: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b, n, _ = h.shape
    att = layer.self_attn
    q = att.q_proj(h).view(b, n, heads, hd).transpose(1, 2)
    k = att.k_proj(h).view(b, n, kv_heads, hd).transpose(1, 2)
    v = att.v_proj(h).view(b, n, kv_heads, hd).transpose(1, 2)
    return rope(q, pos), rope(k, pos), v


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
    return y.transpose(1, 2).flatten(2)


def _layer(
    layer: nn.Module,
    x: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor,
    gate: torch.Tensor | None,
    cond: torch.Tensor | None,
) -> torch.Tensor:
    out = layer.self_attn.o_proj(_attend(q, k, v, mask))
    x = x + (out if gate is None else gate * out)
    h, gate2 = _norm(layer.post_attention_layernorm, x, cond)
    out = layer.mlp(h)
    return x + (out if gate2 is None else gate2 * out)


def prefix_pass(
    lm: nn.Module, x: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Run the VLM's layers over the prefix [B, Lp, D]; returns each layer's (keys, values)."""
    c = lm.config
    kv = []
    for layer in lm.layers:
        h = layer.input_layernorm(x)
        q, k, v = _qkv(layer, h, c.num_attention_heads, c.num_key_value_heads, c.head_dim, pos)
        kv.append((k, v))
        x = _layer(layer, x, q, k, v, mask, None, None)
    return kv


def suffix_pass(
    expert: nn.Module,
    x: torch.Tensor,
    prefix_kv: list[tuple[torch.Tensor, torch.Tensor]],
    mask: torch.Tensor,
    pos: torch.Tensor,
    cond: torch.Tensor | None = None,
) -> torch.Tensor:
    """The expert's layers over the suffix [B, Ls, D2], attending to the cached prefix; ``mask``
    is [B, Ls, Lp + Ls] (True = may attend). Returns the final-normed suffix states."""
    c = expert.config
    for layer, (pk, pv) in zip(expert.layers, prefix_kv):
        h, gate = _norm(layer.input_layernorm, x, cond)
        q, k, v = _qkv(layer, h, c.num_attention_heads, c.num_key_value_heads, c.head_dim, pos)
        x = _layer(layer, x, q, torch.cat([pk, k], 2), torch.cat([pv, v], 2), mask, gate, cond)
    return _norm(expert.norm, x, cond)[0]


def block_mask(valid: torch.Tensor, ar: torch.Tensor) -> torch.Tensor:
    """openpi's attention rule: token i sees token j iff ``cumsum(ar)[j] <= cumsum(ar)[i]`` and j is
    real.

    ``valid`` [B, L] bool, ``ar`` [L] int (1 starts a new causal block). Returns [B, L, L] bool.
    """
    ar = ar.to(valid.device)
    cum = torch.cumsum(ar, 0)
    allowed = cum[None, :] <= cum[:, None]
    eye = torch.eye(len(ar), dtype=torch.bool, device=valid.device)[
        None
    ]  # a padding token sees itself: no all-masked row (NaN)
    return (allowed[None] & valid[:, None, :].bool()) | eye
