"""``actor.strategy``: how the actor's ranks split the work of one model (a registry of wraps).

Why a registry: the trainers ask the same few things of every data-parallel scheme (join the
group, wrap the model, average the gradients, clip, read / write the weights), so a new scheme
is one class registered here and one config value, not a branch in every trainer.

- ``ddp``: every rank holds the whole model; gradients are all-reduced by hand
  (:class:`learner.actor.ddp.GradSync`).
- ``fsdp``: parameters, gradients and optimiser state are sharded over the ranks with FSDP2
  (:class:`learner.actor.fsdp.FSDPStrategy`); sharded checkpoints through
  ``torch.distributed.checkpoint``, converted to the single-file format by
  :mod:`learner.actor.fsdp_convert`.

>>> sorted(STRATEGIES.names())
['ddp', 'fsdp']
>>> make_strategy("ddp", 0, 1).name
'ddp'
>>> try:
...     make_strategy("fdsp", 0, 1)
... except ConfigError as e:
...     print(e)
key 'actor.strategy'='fdsp' is unknown; choose one of ['ddp', 'fsdp']; did you mean 'fsdp'?
"""

from __future__ import annotations

from learner.actor.ddp import GradSync
from learner.actor.fsdp import FSDPStrategy
from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import Registry, did_you_mean

__all__ = ["STRATEGIES", "Strategy", "check_strategy", "make_strategy"]

Strategy = GradSync  # the interface every strategy implements (the replicated one is the base)

STRATEGIES: Registry[type[GradSync]] = Registry("actor strategy")
STRATEGIES.add("ddp", GradSync)
STRATEGIES.add("fsdp", FSDPStrategy)


def check_strategy(name: str) -> None:
    """ConfigError naming ``actor.strategy`` and the known strategies for an unknown ``name``."""
    if name not in STRATEGIES.names():
        known = sorted(STRATEGIES.names())
        raise ConfigError(
            f"key 'actor.strategy'={name!r} is unknown; choose one of {known}"
            + did_you_mean(name, known)
        )


def make_strategy(name: str, rank: int, world_size: int) -> GradSync:
    """The strategy ``name`` for one rank of ``world_size``."""
    check_strategy(name)
    return STRATEGIES.get(name)(rank, world_size)
