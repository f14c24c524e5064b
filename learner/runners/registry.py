"""Runner registry: a config's top-level ``runner:`` string -> its config class and loop.

Runner modules register themselves on import (``learner.runners.embodied`` adds
``embodied``). :func:`get_runner` imports the module of a known runner first, so callers
(the CLI) need not import every runner, and importing this module stays cheap (no torch/Ray).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlinf_contracts.registry import Registry


@dataclass(frozen=True)
class RunnerSpec:
    config_cls: type
    run: Callable[[Any, Any], dict]
    # (config, slots on this machine) -> True when the run needs no Ray (one local process)
    in_process: Callable[[Any, int], bool] | None = None


RUNNERS: Registry[RunnerSpec] = Registry("runner")

# runner name -> module that registers it (imported on first use)
RUNNER_MODULES: dict[str, str] = {
    "embodied": "learner.runners.embodied",
    "encoder_pretrain": "learner.runners.encoder_pretrain",
    "reasoning": "learner.runners.reasoning",
    "offpolicy": "learner.runners.offpolicy",
    "offline": "learner.runners.offline",
    "reward_classifier": "learner.runners.reward_classifier",
    "vla_sft": "learner.runners.vla_sft",
}


def get_runner(name: str) -> RunnerSpec:
    """``RUNNERS.get(name)`` after importing the runner's module if it is a known lazy one."""
    if name not in RUNNERS and name in RUNNER_MODULES:
        importlib.import_module(RUNNER_MODULES[name])
    return RUNNERS.get(name)
