"""Pure helpers shared by the GPU engine adapters (vllm, sglang): no engine import needed.

They are the parts of an engine adapter that can be wrong without a GPU: how actor weight
names map onto the engine's, how a big state dict is cut into bounded transfers, how prompts
are grouped into requests, and how engine outputs become a :class:`RolloutBatch`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

__all__ = ["engine_param_name", "weight_chunks", "request_batches", "finish_reason"]

# wrappers that add a prefix to every parameter name (DDP / FSDP / torch.compile / peft)
_PREFIXES = ("module.", "_orig_mod.", "_fsdp_wrapped_module.", "base_model.model.")


def engine_param_name(name: str) -> str | None:
    """Actor parameter name -> the name the inference engine loads; None to skip it.

    Strips wrapper prefixes; LoRA adapter tensors (``lora_A`` / ``lora_B``) are skipped because
    the actor publishes merged weights; peft's ``base_layer.`` infix is removed.

    >>> engine_param_name("module.model.layers.0.self_attn.q_proj.weight")
    'model.layers.0.self_attn.q_proj.weight'
    >>> engine_param_name("base_model.model.model.layers.0.mlp.up_proj.base_layer.weight")
    'model.layers.0.mlp.up_proj.weight'
    >>> lora = "base_model.model.model.layers.0.mlp.up_proj.lora_A.default.weight"
    >>> engine_param_name(lora) is None
    True
    """
    changed = True
    while changed:
        changed = False
        for p in _PREFIXES:
            if name.startswith(p):
                name, changed = name[len(p) :], True
    if ".lora_" in name or "lora_embedding" in name:
        return None
    return name.replace(".base_layer.", ".")


def weight_chunks(
    state_dict: dict[str, torch.Tensor], max_bytes: int = 1 << 30
) -> list[list[tuple[str, torch.Tensor]]]:
    """Renamed ``(name, tensor)`` pairs in chunks of at most ``max_bytes`` (one tensor may
    exceed it alone). Bounded chunks keep the engine's extra memory during an update small."""
    if max_bytes <= 0:
        raise ValueError(f"max_bytes must be > 0, got {max_bytes}")
    chunks: list[list[tuple[str, torch.Tensor]]] = []
    cur: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, t in state_dict.items():
        mapped = engine_param_name(name)
        if mapped is None:
            continue
        nbytes = t.numel() * t.element_size()
        if cur and size + nbytes > max_bytes:
            chunks.append(cur)
            cur, size = [], 0
        cur.append((mapped, t))
        size += nbytes
    if cur:
        chunks.append(cur)
    return chunks


def request_batches(
    prompt_ids: Sequence[Sequence[int]], n: int, max_requests: int = 0, expand_samples: bool = False
) -> list[list[tuple[int, list[int]]]]:
    """Group prompts into engine calls of at most ``max_requests`` requests (0 = one call).

    Each request is ``(prompt_index, token_ids)``. With ``expand_samples`` every prompt is
    repeated ``n`` times (engines without a per-request ``n``), and a prompt's copies are never
    split across calls, so the samples of one group stay contiguous.
    """
    copies = n if expand_samples else 1
    per_prompt = [[(i, list(p))] * copies for i, p in enumerate(prompt_ids)]
    if max_requests <= 0:
        return [[r for group in per_prompt for r in group]]
    if max_requests < copies:
        raise ValueError(
            f"max_requests={max_requests} is smaller than one group of n={copies} samples"
        )
    out: list[list[tuple[int, list[int]]]] = [[]]
    for group in per_prompt:
        if len(out[-1]) + len(group) > max_requests:
            out.append([])
        out[-1].extend(group)
    return [b for b in out if b]


def finish_reason(raw: Any) -> str:
    """Normalise engine finish reasons (``"stop"``, ``{"type": "length"}``, ``"abort"``...)."""
    if isinstance(raw, dict):
        raw = raw.get("type")
    return "length" if raw == "length" else "stop"


def flatten(xs: Iterable[Iterable[Any]]) -> list[Any]:
    return [x for group in xs for x in group]
