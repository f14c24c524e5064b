"""A timm-style ViT with timm's parameter names (the layout OpenVLA's vision backbones ship).

Why not timm: it is not a dependency; OpenVLA's checkpoints store its two backbones (DINOv2 with
register tokens, SigLIP) under timm names, so a small module with the same names loads them.
Keys: ``cls_token``, ``reg_token``, ``pos_embed``, ``patch_embed.proj``, ``blocks.N.{norm1,
attn.qkv, attn.proj, ls1.scale_factor, norm2, mlp.fc1, mlp.fc2, ls2.scale_factor}``, ``norm``.
(OpenVLA's HF port names LayerScale's ``gamma`` ``scale_factor``.) Features are the patch
tokens of the second-to-last block, as OpenVLA takes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class VitConfig:
    image_size: int = 224
    patch: int = 14
    dim: int = 1024
    depth: int = 24
    heads: int = 16
    mlp_ratio: float = 4.0
    cls_token: bool = True  # DINOv2 yes, SigLIP no
    registers: int = 0  # DINOv2-reg: 4
    layer_scale: bool = False  # DINOv2 yes


class _LayerScale(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale_factor = nn.Parameter(torch.full((dim,), 1e-5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale_factor


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


class _Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(nn.functional.gelu(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self, cfg: VitConfig) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.dim, eps=1e-6), nn.LayerNorm(cfg.dim, eps=1e-6)
        self.attn = _Attention(cfg.dim, cfg.heads)
        self.mlp = _Mlp(cfg.dim, int(cfg.dim * cfg.mlp_ratio))
        self.ls1 = _LayerScale(cfg.dim) if cfg.layer_scale else nn.Identity()
        self.ls2 = _LayerScale(cfg.dim) if cfg.layer_scale else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class _PatchEmbed(nn.Module):
    def __init__(self, cfg: VitConfig) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, cfg.dim, cfg.patch, cfg.patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class TimmVit(nn.Module):
    """Images [B, 3, S, S] -> patch features [B, (S / patch)^2, dim] (second-to-last block)."""

    def __init__(self, cfg: VitConfig) -> None:
        super().__init__()
        self.cfg = cfg
        n = (cfg.image_size // cfg.patch) ** 2
        self.patch_embed = _PatchEmbed(cfg)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim)) if cfg.cls_token else None
        self.reg_token = (
            nn.Parameter(torch.zeros(1, cfg.registers, cfg.dim)) if cfg.registers else None
        )
        self.pos_embed = nn.Parameter(torch.randn(1, n + int(cfg.cls_token), cfg.dim) * 0.02)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(cfg.dim, eps=1e-6)
        self.prefix_tokens = int(cfg.cls_token) + cfg.registers

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images)
        b = x.shape[0]
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(b, -1, -1), x], 1)
        x = x + self.pos_embed  # DINOv2: position embeddings on cls + patches, registers after
        if self.reg_token is not None:
            x = torch.cat([x[:, :1], self.reg_token.expand(b, -1, -1), x[:, 1:]], 1)
        for blk in self.blocks[: max(len(self.blocks) - 1, 1)]:
            x = blk(x)
        return x[:, self.prefix_tokens :]
