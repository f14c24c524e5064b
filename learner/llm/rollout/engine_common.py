"""Pure helpers shared by the GPU engine adapters (vllm, sglang): no engine import needed.

They are the parts of an engine adapter that can be wrong without a GPU: how actor weight
names map onto the engine's, how a big state dict is cut into bounded transfers, how prompts
are grouped into requests, and how engine outputs become a :class:`RolloutBatch`; and what every
adapter does the same way whatever its engine (:class:`EngineRolloutBackend`): which config keys
build it and how a text prompt reaches the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from learner.llm.rollout.base import RolloutBackend, RolloutBatch, SamplingParams

__all__ = [
    "EngineRolloutBackend",
    "EngineSpec",
    "engine_param_name",
    "weight_chunks",
    "request_batches",
    "finish_reason",
]

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


@dataclass(frozen=True)
class EngineSpec:
    """What starts a GPU engine, whichever: the model to serve and its share of the GPU(s).

    ``max_requests`` caps the requests of one engine call (0: all prompts in one call)."""

    model_path: str
    gpu_memory_utilization: float = 0.5
    tensor_parallel: int = 1
    dtype: str = "bfloat16"
    max_requests: int = 0

    @classmethod
    def from_config(cls, cfg: Any) -> EngineSpec:
        """The ``model`` / ``rollout`` sections of an LLM run's config."""
        return cls(
            cfg.model.path,
            cfg.rollout.gpu_memory_utilization,
            cfg.rollout.tensor_parallel,
            cfg.model.dtype,
        )


class EngineRolloutBackend(RolloutBackend):
    """A GPU engine adapter: built from a run's config (:meth:`from_config`), text prompts
    tokenized here and sent as token ids, so a first turn and a multi-turn context (already ids)
    take the one path of :meth:`generate_ids`, which each adapter writes for its engine."""

    def __init__(self, spec: EngineSpec, tokenizer: Any) -> None:
        self.spec, self.tokenizer = spec, tokenizer
        self.max_requests = spec.max_requests
        self.weight_version = 0
        self.model = None  # the engine's model lives inside the engine

    @classmethod
    def config_extras(cls, cfg: Any) -> dict[str, Any]:
        """Keyword arguments an adapter takes from the config beyond :class:`EngineSpec`."""
        return {}

    @classmethod
    def from_config(cls, cfg: Any, tokenizer_dir: str) -> EngineRolloutBackend:
        from learner.llm.tokenizer import load_tokenizer

        return cls(
            EngineSpec.from_config(cfg), load_tokenizer(tokenizer_dir), **cls.config_extras(cfg)
        )

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> RolloutBatch:
        return self.generate_ids(
            [list(self.tokenizer(p, add_special_tokens=False).input_ids) for p in prompts], params
        )
