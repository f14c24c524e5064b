"""Find the runner a config asks for (``runner: embodied``) without importing every runner."""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from learner.config.errors import ConfigError

# runner name -> module that registers it in learner.runners.registry.RUNNERS on import
RUNNER_MODULES: dict[str, str] = {
    "embodied": "learner.runners.embodied",
    "reasoning": "learner.runners.reasoning",
}


def runner_spec(name: str) -> Any:
    if name not in RUNNER_MODULES:
        near = difflib.get_close_matches(name, list(RUNNER_MODULES), n=1)
        hint = f" Did you mean '{near[0]}'?" if near else ""
        raise ConfigError(f"key 'runner': unknown runner '{name}'; known: {', '.join(RUNNER_MODULES)}.{hint}")
    importlib.import_module(RUNNER_MODULES[name])
    from learner.runners.registry import RUNNERS

    return RUNNERS.get(name)
