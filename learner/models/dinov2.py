"""DINOv2 (ViT-S/14, ViT-B/14) as a frozen-encoder backbone, loadable from its released files.

Why: DINOv2's features are the strongest general-purpose frozen image features with released
weights, and OpenVLA's vision tower is one; a user who has a DINOv2 file should be able to put it
under the camera-only learner. The network is :class:`learner.models.adapters.vit.TimmVit` (timm's
names, the layout OpenVLA ships); the released layouts are converted on load:

* facebookresearch's ``dinov2_vit{s,b}14[_reg4]_pretrain.pth`` (torch hub): ``blocks.N.ls1.gamma``
  -> ``ls1.scale_factor``, ``register_tokens`` -> ``reg_token``, ``mask_token`` dropped;
* a Hugging Face export (``model.safetensors`` of ``Dinov2Model``, the older
  ``attention.attention.query`` or the newer ``attention.q_proj`` names): q / k / v concatenated
  into ``qkv``, ``layer_scale1.lambda1`` -> ``ls1.scale_factor``, ``layernorm`` -> ``norm``.

The released position embeddings are for 518 px (37 x 37 patches); camera frames are small (64-128
px), so frames are resized to the nearest multiple of the patch (``14 * ceil(side / 14)``) and the
position grid is resampled (bicubic, as DINOv2 does at run time) once, on load.

Features: the final LayerNorm's class token and the mean of its patch tokens, ``2 * dim`` numbers
per camera (DINOv2's linear-probe readout).

What it costs on a CPU: ViT-S/14 on a 70 px frame is about 1 GFLOP; with two cameras and four
cached views that is tens of milliseconds per frame on one core, so it is a GPU's backbone
(or ``model.encoder.cached_views: 1``); the keypoint backbone is the CPU's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from learner.models.adapters.vit import TimmVit, VitConfig
from learner.models.backbones import BACKBONES, imagenet_normalised, read_state

PATCH = 14
SIZES = {"dinov2_vits14": (384, 12, 6), "dinov2_vitb14": (768, 12, 12)}  # dim, depth, heads
REGISTERS = 4  # the "_reg" entries: DINOv2 with register tokens (dinov2_vit*14_reg4_pretrain.pth)


class DinoV2(nn.Module):
    """One camera ``[N, 3, H, W]`` in ``[-0.5, 0.5]`` -> ``[N, 2 * dim]`` (class token, mean patch).

    ``grid`` is the patch grid the module runs at (the frame is resized to ``14 * grid``); the
    registry's entries size it from the camera when the encoder is built."""

    def __init__(self, cfg: VitConfig, grid: int) -> None:
        super().__init__()
        self.grid = int(grid)
        self.vit = TimmVit(replace(cfg, image_size=cfg.patch * self.grid))
        self.out_dim = 2 * cfg.dim

    def forward(self, x: Tensor) -> Tensor:
        side = self.vit.cfg.patch * self.grid
        if x.shape[-2:] != (side, side):
            x = F.interpolate(x, size=(side, side), mode="bilinear", align_corners=False)
        v = self.vit
        t = v.patch_embed(imagenet_normalised(x))
        b = t.shape[0]
        assert v.cls_token is not None  # DINOv2 always has one
        t = torch.cat([v.cls_token.expand(b, -1, -1), t], 1) + v.pos_embed
        if v.reg_token is not None:
            t = torch.cat([t[:, :1], v.reg_token.expand(b, -1, -1), t[:, 1:]], 1)
        for blk in v.blocks:
            t = blk(t)
        t = v.norm(t)
        return torch.cat([t[:, 0], t[:, v.prefix_tokens :].mean(1)], dim=-1)

    def read_weights(self, path: str | Path) -> dict[str, Tensor]:
        """A released DINOv2 file (hub or Hugging Face layout), or a state dict of this module's
        keys, as this module's state dict (position grid resampled to :attr:`grid`)."""
        state = read_state(path)
        if any(k.startswith("vit.") for k in state):
            return state
        state = {k.removeprefix("dinov2."): v for k, v in state.items()}
        if any(k.startswith("embeddings.") for k in state):
            state = _from_hugging_face(state)
        out = {_HUB_NAMES.get(k, k): v for k, v in state.items() if k != "mask_token"}
        out = {k.replace(".gamma", ".scale_factor"): v for k, v in out.items()}
        if "pos_embed" in out:
            out["pos_embed"] = resample_positions(out["pos_embed"], self.grid)
        return {f"vit.{k}": v for k, v in out.items()}


_HUB_NAMES = {"register_tokens": "reg_token"}


def _from_hugging_face(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """``Dinov2Model`` keys -> timm's (both the older and the newer attention names)."""
    out: dict[str, Tensor] = {}
    qkv: dict[str, dict[str, Tensor]] = {}
    fixed = {
        "embeddings.cls_token": "cls_token",
        "embeddings.mask_token": "mask_token",
        "embeddings.register_tokens": "reg_token",
        "embeddings.position_embeddings": "pos_embed",
        "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
        "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
        "layernorm.weight": "norm.weight",
        "layernorm.bias": "norm.bias",
    }
    parts = {
        "attention.attention.query": "q",
        "attention.attention.key": "k",
        "attention.attention.value": "v",
        "attention.q_proj": "q",
        "attention.k_proj": "k",
        "attention.v_proj": "v",
    }
    renames = {
        "attention.output.dense": "attn.proj",
        "attention.o_proj": "attn.proj",
        "layer_scale1.lambda1": "ls1.scale_factor",
        "layer_scale2.lambda1": "ls2.scale_factor",
    }
    for key, value in state.items():
        if key in fixed:
            out[fixed[key]] = value
            continue
        if not key.startswith("encoder.layer."):
            out[key] = value  # unknown: reported as unexpected by the strict load
            continue
        index, rest = key.removeprefix("encoder.layer.").split(".", 1)
        stem, _, leaf = rest.rpartition(".")
        if stem in parts:
            qkv.setdefault(f"blocks.{index}.attn.qkv.{leaf}", {})[parts[stem]] = value
            continue
        name = renames.get(rest) or (renames[stem] + "." + leaf if stem in renames else rest)
        out[f"blocks.{index}.{name}"] = value
    for key, pieces in qkv.items():
        out[key] = torch.cat([pieces["q"], pieces["k"], pieces["v"]], dim=0)
    if "cls_token" in out and out["cls_token"].dim() == 2:
        out["cls_token"] = out["cls_token"][None]
    return out


def resample_positions(pos: Tensor, grid: int) -> Tensor:
    """``[1, 1 + g * g, D]`` position embeddings -> ``[1, 1 + grid * grid, D]`` (bicubic on the
    patch grid, the class token's kept)."""
    n = pos.shape[1] - 1
    g = math.isqrt(n)
    if g * g != n:
        raise ValueError(f"position embeddings of {n} patches are not a square grid")
    if g == grid:
        return pos
    patches = pos[:, 1:].reshape(1, g, g, -1).permute(0, 3, 1, 2).float()
    patches = F.interpolate(patches, size=(grid, grid), mode="bicubic", align_corners=False)
    patches = patches.permute(0, 2, 3, 1).reshape(1, grid * grid, -1).to(pos.dtype)
    return torch.cat([pos[:, :1], patches], dim=1)


def _entry(size: str, registers: int) -> Callable[..., DinoV2]:
    dim, depth, heads = SIZES[size]

    def build(
        channels: Sequence[int] = (), grid: int = 0, hw: tuple[int, int] = (64, 64)
    ) -> DinoV2:
        cfg = VitConfig(
            patch=PATCH,
            dim=dim,
            depth=depth,
            heads=heads,
            cls_token=True,
            registers=registers,
            layer_scale=True,
        )
        return DinoV2(cfg, math.ceil(max(hw) / PATCH))

    return build


for _size in SIZES:
    BACKBONES.add(_size, _entry(_size, 0))
    BACKBONES.add(f"{_size}_reg", _entry(_size, REGISTERS))

__all__ = ["DinoV2", "PATCH", "SIZES", "resample_positions"]
