"""Sharded data parallelism for the actor: PyTorch FSDP2 (``fully_shard``) behind the strategy API.

Why: data parallelism that replicates the model (:class:`~learner.actor.ddp.GradSync`) keeps a
full copy of weights, gradients and Adam moments on every rank; a VLA or an LLM actor whose
optimiser state does not fit one device needs them split across ranks. ``fully_shard`` per
block (every transformer layer / adapter block, :func:`shard_units`), then the root, shards
each parameter along dim 0 over the ranks; the forward all-gathers one block at a time and the
backward reduce-scatters its gradients, so the averaging the replicated strategy does by hand
happens inside ``loss.backward()``.

A module a caller runs through other methods than ``forward`` (a VLA adapter: the policy's lazy
distribution calls its ``act`` / ``log_prob`` after the policy's own forward has returned) names
them in ``fsdp_forward_methods``; it becomes a unit of its own whose methods gather and release
its weights as a forward does (:func:`method_units`). A block class whose sub-modules a model
calls one by one (``fsdp_piecewise``: π0's joint attention runs the Gemma layers' projections
itself) is not a unit, since FSDP's hooks sit on a forward that never runs.

State leaves the shards three ways: :meth:`FSDPStrategy.full_state_dict` (all ranks gather, rank 0
keeps the CPU copy: what rollout workers and ``model.safetensors`` get),
:meth:`FSDPStrategy.save_train_state` / :meth:`~FSDPStrategy.load_train_state` (model and
optimiser shards with ``torch.distributed.checkpoint``: each rank writes only its own), and
:func:`learner.actor.fsdp_convert.convert_sharded` (a sharded directory back to the single-file
checkpoint ``rlinf serve`` loads, in one process).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import (
    FSDPModule,
    MixedPrecisionPolicy,
    fully_shard,
    register_fsdp_forward_method,
)
from torch.distributed.tensor import DTensor

from learner.actor.ddp import GradSync

__all__ = ["FSDPStrategy", "SHARDED_DIR", "method_units", "mixed_precision", "shard_units"]

log = logging.getLogger(__name__)

SHARDED_DIR = "sharded"  # the DCP directory inside a checkpoint directory


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The blocks that each get their own ``fully_shard`` call, outermost first.

    A Hugging Face model names its block classes (``_no_split_modules``: the decoder layer,
    the vision block); any other model's blocks are the entries of its ``nn.ModuleList``s
    (transformer layers, adapter blocks). A block inside a chosen block is not chosen again:
    one all-gather per block is the point. A model with neither (an MLP policy) is one unit, the
    root, which the caller shards anyway. Block classes a module calls piece by piece (its
    ``fsdp_piecewise``) are left to the enclosing unit.
    """
    names: set[str] = set()
    piecewise: set[str] = set()
    for sub in model.modules():  # a wrapped HF model (PEFT) names them one level down
        names |= set(getattr(sub, "_no_split_modules", None) or ())
        piecewise |= set(getattr(sub, "fsdp_piecewise", None) or ())
    chosen: list[nn.Module] = []
    inside: set[int] = set()

    def visit(module: nn.Module) -> None:
        for child in module.children():
            if id(child) in inside:
                continue
            if names:
                pick = type(child).__name__ in names - piecewise
            else:
                pick = isinstance(module, nn.ModuleList)
            if pick and next(child.parameters(), None) is not None:
                chosen.append(child)
                inside.update(id(m) for m in child.modules())
                continue
            visit(child)

    visit(model)
    return chosen


def method_units(model: nn.Module) -> list[tuple[nn.Module, tuple[str, ...]]]:
    """The sub-modules (not the root) that name ``fsdp_forward_methods``, innermost first (the
    order ``fully_shard`` needs), each with those method names."""
    found = [
        (m, tuple(getattr(m, "fsdp_forward_methods", None) or ()))
        for m in model.modules()
        if m is not model
    ]
    return [(m, methods) for m, methods in reversed(found) if methods]


def mixed_precision(device: torch.device) -> MixedPrecisionPolicy | None:
    """bf16 compute with fp32 gradient reduction where the device has bf16, else ``None`` (fp32).

    Why not on CPU: gloo reduces bf16 slowly or not at all on some builds, CPU bf16 matmuls
    are slower than fp32 on most hosts, and the CPU path exists to prove the sharded update
    equals the single-process one -- which bf16 rounding would blur. The sharded parameters and
    Adam moments stay fp32 everywhere (``param_dtype`` only casts the gathered copy).
    """
    if device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return None


def _device_of(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


class FSDPStrategy(GradSync):
    """``actor.strategy: fsdp``. One rank: nothing to shard, the model stays as it is and every
    call is the replicated strategy's no-op. Several ranks: :meth:`wrap` shards the model after
    :meth:`init`; the caller rebuilds its optimiser on the new (sharded) parameters."""

    name = "fsdp"
    collective_state = True  # full state / save: every rank must call

    def __init__(self, rank: int, world_size: int) -> None:
        super().__init__(rank, world_size)
        self.mesh: DeviceMesh | None = None

    @property
    def sharded(self) -> bool:
        return self.mesh is not None

    def backend(self) -> str:
        """CPU tensors over gloo, CUDA tensors over NCCL, in one group: the embodied trainer's
        policies live on CPU while an LLM actor lives on its GPU."""
        return "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"

    def wrap(self, model: nn.Module) -> nn.Module:
        """Shard ``model`` in place: each of :func:`shard_units`, then each of
        :func:`method_units` (its methods registered as forwards), then the root. Returns it.
        A second model (a frozen KL reference) shards over the same mesh, so a copy of the
        first one's state dict loads shard for shard, with no communication."""
        if self.world_size == 1:
            return model
        self._check()
        if self.is_wrapped(model):
            return model
        device = _device_of(model)
        if self.mesh is None:
            self.mesh = init_device_mesh(device.type, (self.world_size,))
        mp = mixed_precision(device)
        kw: dict[str, Any] = {"mesh": self.mesh}
        if mp is not None:
            kw["mp_policy"] = mp
        units = shard_units(model)
        for unit in units:
            fully_shard(unit, **kw)
        entries = method_units(model)
        for unit, methods in entries:  # after the blocks inside it
            fully_shard(unit, **kw)
            for method in methods:
                register_fsdp_forward_method(unit, method)
        fully_shard(model, **kw)
        log.info(
            "fsdp: %d block(s) + %d module(s) called by method + root sharded over %d ranks "
            "on %s (%s)",
            len(units),
            len(entries),
            self.world_size,
            device.type,
            "bf16 params / fp32 reduce" if mp is not None else "fp32",
        )
        return model

    def average_grads(self, params: list[nn.Parameter]) -> None:
        """Nothing: the backward already reduce-scattered (averaged) every gradient shard."""
        if not self.sharded:
            super().average_grads(params)

    def clip_grad_norm(self, params: list[nn.Parameter], max_norm: float) -> float:
        """Global grad-norm clip over the shards (the norm is all-reduced across ranks)."""
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        return float(norm)

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Unsharded CPU state on rank 0 (empty elsewhere); a collective when sharded."""
        if not self.sharded:
            return super().full_state_dict(model)
        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return {k: v for k, v in get_model_state_dict(model, options=opts).items()}  # type: ignore[misc]  # tensors only: a module's state dict

    def load_full_state_dict(
        self, model: nn.Module, state: dict[str, torch.Tensor], strict: bool = True
    ) -> None:
        """Load a full state dict every rank holds; each keeps its own shard of it."""
        if not self.sharded:
            super().load_full_state_dict(model, state, strict)
            return
        opts = StateDictOptions(full_state_dict=True, strict=strict)
        set_model_state_dict(model, dict(state), options=opts)

    def save_train_state(
        self, path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer
    ) -> bool:
        """Model + optimiser shards under ``path/sharded`` (every rank writes its own part)."""
        if not self.sharded:
            return False
        model_sd, optim_sd = get_state_dict(model, optimizer)
        dcp_save(
            {"model": model_sd, "optim": optim_sd}, checkpoint_id=str(Path(path) / SHARDED_DIR)
        )
        return True

    def load_train_state(
        self, path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer
    ) -> bool:
        """Restore :meth:`save_train_state`'s shards (any rank count that wrote them: DCP
        reshards on load); False when ``path`` has none (a replicated run's checkpoint).

        Partial on the optimiser's side: Adam keeps no state for a parameter no loss has reached
        yet (π0's last prefix query projection feeds no action), so the saved shards lack it,
        while the fresh optimiser's template (``get_state_dict`` initialises every parameter's
        state) asks for it; such a parameter keeps the template's zero moments. The model's
        keys are all there, and checked: a missing weight is an error, not a fresh start."""
        where = Path(path) / SHARDED_DIR
        if not self.sharded or not where.is_dir():
            return False
        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": model_sd, "optim": optim_sd}
        dcp_load(
            state,
            checkpoint_id=str(where),
            planner=DefaultLoadPlanner(allow_partial_load=True),
        )
        missing = set(model_sd) - _saved_keys(where, "model")
        if missing:
            raise RuntimeError(
                f"sharded checkpoint {where} lacks model weights {sorted(missing)[:3]}: it was "
                "written by another model"
            )
        set_model_state_dict(model, state["model"])
        set_optimizer_state_dict(model, optimizer, state["optim"])
        return True

    @staticmethod
    def is_wrapped(model: nn.Module) -> bool:
        return isinstance(model, FSDPModule)

    @staticmethod
    def local_shard(t: torch.Tensor) -> torch.Tensor:
        """This rank's part of a (possibly sharded) tensor."""
        return _local(t)


def _saved_keys(where: Path, prefix: str) -> set[str]:
    """The state keys under ``prefix`` that a DCP checkpoint directory holds (its metadata)."""
    from torch.distributed.checkpoint import FileSystemReader

    meta = FileSystemReader(str(where)).read_metadata()
    head = prefix + "."
    return {k[len(head) :] for k in meta.state_dict_metadata if k.startswith(head)}
