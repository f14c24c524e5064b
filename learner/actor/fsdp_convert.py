"""A sharded actor checkpoint back to the single-file layout ``rlinf serve`` loads.

Why a separate step: under ``actor.strategy: fsdp`` each rank writes only its shards
(``<iter dir>/sharded``, ``torch.distributed.checkpoint``); the runner also gathers a
``model.safetensors`` on rank 0, but a checkpoint whose single file is missing or stale (a
crash between the two writes, shards copied off a cluster) still holds everything needed. This
module reads the shards in one process -- no process group, any number of ranks having written
them -- into the unsharded model and writes the ordinary checkpoint directory
(:func:`learner.checkpoint.write_checkpoint`: ``model.safetensors`` + ``meta.json``, the bytes
:func:`rlinf_contracts.weight_blob.weights_from_bytes` decodes). An LLM actor's checkpoint keeps
its Hugging Face config and tokenizer files beside the weights, as the runner wrote them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load

from learner.actor.fsdp import SHARDED_DIR
from learner.checkpoint import META_FILE, read_meta, write_checkpoint

__all__ = ["convert_sharded", "load_sharded_model"]


def load_sharded_model(src: str | Path, model: nn.Module) -> dict[str, torch.Tensor]:
    """Fill the unsharded ``model`` from the shards under ``src`` (a checkpoint directory or
    its ``sharded`` folder); returns its state dict, CPU tensors."""
    where = Path(src)
    if where.name != SHARDED_DIR:
        where = where / SHARDED_DIR
    if not where.is_dir():
        raise FileNotFoundError(
            f"no sharded checkpoint at '{where}': actor.strategy=fsdp writes one per save"
        )
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    dcp_load({"model": state}, checkpoint_id=str(where), no_dist=True)
    model.load_state_dict(state)
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def _embodied(meta: dict, src: Path) -> nn.Module:
    """The embodied policy a checkpoint's meta names (registry name, kwargs and spec)."""
    from learner.checkpoint import policy_spec_of
    from learner.models import build_policy

    spec = policy_spec_of(meta)
    return build_policy(meta["model"]["name"], spec, **meta["model"].get("kwargs", {}))


def _causal_lm(meta: dict, src: Path) -> nn.Module:
    """An LLM actor: the architecture from the HF ``config.json`` beside the weights."""
    from transformers import AutoConfig, AutoModelForCausalLM

    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(src)))


# meta.json's model name -> the unsharded module the shards fill (any other name: embodied)
REBUILD: dict[str, Callable[[dict, Path], nn.Module]] = {"causal_lm": _causal_lm}
CHECKPOINT_OWN = {"model.safetensors", META_FILE, SHARDED_DIR}  # what the converter rewrites


def _copy_beside(src: Path) -> Callable[[Path], None]:
    """Copy what the runner wrote beside the weights (HF config, tokenizer) into the new one."""

    def beside(tmp: Path) -> None:
        for f in src.iterdir():
            if f.name not in CHECKPOINT_OWN and f.is_file():
                shutil.copy2(f, tmp / f.name)

    return beside


def convert_sharded(src: str | Path, dst: str | Path, model: nn.Module | None = None) -> Path:
    """Write the single-file checkpoint of the sharded one at ``src`` (or the latest under a run
    directory) to ``dst`` (e.g. ``<out_dir>/checkpoints/iter_000010``); returns ``dst``.

    ``model``: the unsharded module to fill; by default the embodied policy rebuilt from the
    checkpoint's ``meta.json``, which ``dst`` keeps (iteration, weight version, spec, config).
    """
    src_dir, meta = read_meta(src)
    name = meta["model"]["name"]
    target = model if model is not None else REBUILD.get(name, _embodied)(meta, src_dir)
    state = load_sharded_model(src_dir, target)
    return write_checkpoint(
        dst,
        state,
        meta["model"],
        iteration=int(meta["iteration"]),
        weight_version=int(meta.get("weight_version", 0)),
        spec=meta.get("spec"),
        config=meta.get("config"),
        metrics=meta.get("metrics"),
        rng=meta.get("rng"),
        extra={"converted_from": str(src_dir)},
        beside=_copy_beside(src_dir),
    )
