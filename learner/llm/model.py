"""Causal LMs for reasoning RL: a tiny model built from a config (CPU demo) or a pretrained one.

The tiny model is a real ``transformers`` Llama / Qwen2 initialised from a config, so the
rollout backends, log-prob code, checkpoints and ``rlinf eval`` are exercised on exactly the
code path a full-size model takes; only the size differs. Nothing is downloaded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import Registry

__all__ = [
    "LLMModelConfig",
    "ARCHITECTURES",
    "build_model",
    "count_parameters",
    "save_model",
    "load_model",
]

log = logging.getLogger(__name__)


@dataclass
class LLMModelConfig:
    """Which causal LM the reasoning runner trains (``model:``): ``path`` (pretrained /
    checkpoint) or a tiny one from ``arch``. Named apart from the env runners' policy
    :class:`learner.runners.config.ModelConfig`: the two share no field."""

    path: str | None = field(
        default=None,
        metadata={"help": "HF model dir or hub id; null builds a tiny model from arch/hidden/..."},
    )
    arch: Literal["llama", "qwen2"] = field(
        default="llama", metadata={"help": "architecture of the tiny model"}
    )
    hidden_size: int = field(default=128, metadata={"help": "tiny model width"})
    num_layers: int = field(default=4, metadata={"help": "tiny model depth"})
    num_heads: int = field(default=4, metadata={"help": "attention heads (kv heads equal)"})
    intermediate_size: int = field(default=384, metadata={"help": "MLP width"})
    max_position: int = field(
        default=128, metadata={"help": "max sequence length (prompt + response)"}
    )
    dtype: Literal["float32", "bfloat16", "float16"] = field(
        default="float32", metadata={"help": "parameter dtype"}
    )
    seed: int = field(default=0, metadata={"help": "init seed of the tiny model"})
    lora_rank: int = field(default=0, metadata={"help": "LoRA rank (peft); 0 trains all weights"})
    lora_alpha: int = field(default=16, metadata={"help": "LoRA alpha"})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "recompute activations"})

    def validate(self) -> None:
        if self.path is None and self.hidden_size % self.num_heads:
            raise ConfigError(
                f"model.hidden_size={self.hidden_size} must be divisible by "
                f"model.num_heads={self.num_heads}"
            )
        if self.lora_rank < 0:
            raise ConfigError(f"model.lora_rank must be >= 0, got {self.lora_rank}")


ARCHITECTURES: Registry[Any] = Registry("tiny LM architecture")


def _tiny_sizes(cfg: LLMModelConfig, vocab_size: int, special: dict[str, int]) -> dict[str, Any]:
    """The sizes of a tiny model, by the names every transformers decoder config shares: one
    mapping from ``model.*`` whichever architecture is picked (full attention, tied embeddings)."""
    return {
        "vocab_size": vocab_size,
        "hidden_size": cfg.hidden_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_heads,
        "intermediate_size": cfg.intermediate_size,
        "max_position_embeddings": cfg.max_position,
        "tie_word_embeddings": True,
        **special,
    }


@ARCHITECTURES.register("llama")
def _llama_config(cfg: LLMModelConfig, vocab_size: int, special: dict[str, int]) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(**_tiny_sizes(cfg, vocab_size, special))


@ARCHITECTURES.register("qwen2")
def _qwen2_config(cfg: LLMModelConfig, vocab_size: int, special: dict[str, int]) -> Any:
    from transformers import Qwen2Config

    return Qwen2Config(**_tiny_sizes(cfg, vocab_size, special))


def _dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def build_model(cfg: LLMModelConfig, tokenizer: Any | None = None) -> nn.Module:
    """A causal LM: pretrained from ``cfg.path``, else a tiny ``cfg.arch`` model sized for
    ``tokenizer``.

    With ``cfg.lora_rank > 0`` the model is wrapped with peft LoRA adapters on the attention
    and MLP projections (peft must be installed).
    """
    from transformers import AutoModelForCausalLM

    if cfg.path is not None:
        model = AutoModelForCausalLM.from_pretrained(cfg.path, dtype=_dtype(cfg.dtype))
    else:
        if tokenizer is None:
            raise ConfigError(
                "model.path is null, so a tokenizer is needed to size the tiny model's vocab"
            )
        special = {
            "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
        }
        hf_cfg = ARCHITECTURES.get(cfg.arch)(cfg, len(tokenizer), special)
        torch.manual_seed(cfg.seed)
        model = AutoModelForCausalLM.from_config(hf_cfg).to(_dtype(cfg.dtype))
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if cfg.lora_rank > 0:
        model = _wrap_lora(model, cfg)
    log.info("built %s with %.2fM parameters", type(model).__name__, count_parameters(model) / 1e6)
    return model


def _wrap_lora(model: nn.Module, cfg: LLMModelConfig) -> nn.Module:
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as e:  # pragma: no cover - peft is in the llm extra
        raise ImportError("model.lora_rank > 0 needs peft: pip install peft") from e
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lcfg = LoraConfig(
        r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, target_modules=targets, task_type="CAUSAL_LM"
    )
    return get_peft_model(model, lcfg)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def save_model(
    model: nn.Module,
    tokenizer: Any,
    path: str | Path,
    *,
    iteration: int = 0,
    weight_version: int = 0,
    config: dict[str, Any] | None = None,
    metrics: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
    state: dict[str, Any] | None = None,
) -> Path:
    """The shared checkpoint format (:func:`learner.checkpoint.write_checkpoint`) for a causal LM.

    ``model.safetensors`` + ``meta.json`` like every runner's checkpoint, with the HF
    ``config.json`` and the tokenizer files beside them, so ``from_pretrained(path)`` (and vllm /
    sglang) read the directory as it is. LoRA adapters are merged first. ``state``: the full
    weights when ``model`` holds only a shard of them (gathered by the caller).
    """
    from learner.checkpoint import write_checkpoint

    merged = model.merge_and_unload() if hasattr(model, "merge_and_unload") else model

    def beside(tmp: Path) -> None:
        merged.config.save_pretrained(str(tmp))
        if getattr(merged, "generation_config", None) is not None:
            merged.generation_config.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))

    model_meta = {"name": "causal_lm", "kwargs": {"model_type": merged.config.model_type}}
    return write_checkpoint(
        path,
        merged.state_dict() if state is None else state,
        model_meta,
        iteration=iteration,
        weight_version=weight_version,
        config=config,
        metrics=metrics,
        extra=extra,
        beside=beside,
    )


def load_model(path: str | Path, dtype: str = "float32") -> tuple[nn.Module, Any]:
    """Load a checkpoint written by :func:`save_model` (or any HF causal LM dir): (model,
    tokenizer).

    The shared format keeps ``model.safetensors`` with HF's parameter names, so HF's loader
    reads it directly; tied weights saved under both names load as one.
    """
    from transformers import AutoModelForCausalLM

    from learner.llm.tokenizer import load_tokenizer

    p = Path(path)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(
            f"{p} has no config.json; pass a directory written by save_model / save_pretrained"
        )
    return AutoModelForCausalLM.from_pretrained(str(p), dtype=_dtype(dtype)), load_tokenizer(p)
