"""Gradient averaging across actor ranks with ``torch.distributed`` (gloo on CPU, NCCL on GPU).

``actor.strategy: ddp`` (:mod:`learner.actor.strategies`): every rank holds the whole model;
:class:`GradSync` is also the base of the sharded strategy (:mod:`learner.actor.fsdp`), so its
methods beyond the all-reduce (``wrap``, ``full_state_dict``, ``save_train_state``...) are the
replicated answers to what a strategy is asked.

Why not DistributedDataParallel: the actor's step loop is tiny and explicit, so one
``all_reduce`` over a flattened gradient per minibatch is simpler than wrapping the model,
and it works unchanged for a single rank (every call is a no-op when ``world_size == 1``).
"""

from __future__ import annotations

import logging
import socket
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)


def free_address() -> str:
    """``host:port`` on this machine that rank 0 can listen on for the rendezvous."""
    host = socket.gethostbyname(socket.gethostname())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return f"{host}:{s.getsockname()[1]}"


class GradSync:
    """All-reduce helper for one process group; inert for a single rank."""

    name = "ddp"
    collective_state = False  # rank 0 alone can read or save the (replicated) weights

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size
        self.ready = world_size == 1

    def init(self, address: str, timeout_s: float = 120.0) -> None:
        if self.world_size == 1 or self.ready:
            self.ready = True
            return
        if dist.is_initialized():  # a second learner of this rank (a resumed twin) joins it too
            if dist.get_world_size() != self.world_size:
                raise RuntimeError(
                    f"actor rank {self.rank}: the process group has {dist.get_world_size()} "
                    f"ranks, not {self.world_size}"
                )
            self.ready = True
            return
        backend = self.backend()
        dist.init_process_group(
            backend,
            init_method=f"tcp://{address}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=timedelta(seconds=timeout_s),
        )
        self.ready = True
        log.info(
            "actor rank %d/%d joined %s process group at %s",
            self.rank,
            self.world_size,
            backend,
            address,
        )

    def backend(self) -> str:
        """The process group's backend: NCCL for CUDA gradients, else gloo."""
        return "nccl" if torch.cuda.is_available() else "gloo"

    def _check(self) -> None:
        if not self.ready:
            raise RuntimeError(
                f"actor rank {self.rank}: GradSync.init(address) was not called "
                f"before training with {self.world_size} ranks"
            )

    def average_grads(self, params: list[torch.nn.Parameter]) -> None:
        if self.world_size == 1:
            return
        self._check()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world_size
        offset = 0
        for p, g in zip(params, grads):
            n = g.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return t
        self._check()
        t = t.clone()
        dist.all_reduce(t)
        return t

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """Nothing to wrap: the all-reduce runs by hand in :meth:`average_grads`."""
        return model

    def clip_grad_norm(self, params: list[torch.nn.Parameter], max_norm: float) -> float:
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))

    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Owned CPU copies of the (replicated) weights."""
        return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    def load_full_state_dict(
        self, model: torch.nn.Module, state: dict[str, torch.Tensor], strict: bool = True
    ) -> None:
        model.load_state_dict(state, strict=strict)

    def save_train_state(self, path: Any, model: torch.nn.Module, optimizer: Any) -> bool:
        """No sharded state: the single-file checkpoint holds the model and the optimiser."""
        return False

    def load_train_state(self, path: Any, model: torch.nn.Module, optimizer: Any) -> bool:
        return False

    def barrier(self) -> None:
        if self.world_size > 1 and dist.is_initialized():
            dist.barrier()

    def close(self) -> None:
        if self.world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()
