"""Runner registry: a config's top-level ``runner:`` string -> its config class and loop.

Runners register on import (``learner.runners.embodied`` registers ``embodied``); the CLI
looks the name up, builds ``spec.config_cls`` with ``learner.config.from_dict`` and calls
``spec.run(cfg, cluster)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from learner.registry import Registry


@dataclass(frozen=True)
class RunnerSpec:
    config_cls: type
    run: Callable[[Any, Any], dict]


RUNNERS: Registry[RunnerSpec] = Registry("runner")
