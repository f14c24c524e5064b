"""Find the runner a config asks for (``runner: embodied``), with a clear error for a typo."""

from __future__ import annotations

from typing import Any

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.registry import UnknownNameError


def runner_spec(name: str) -> Any:
    from learner.runners.registry import get_runner

    try:
        return get_runner(name)
    except UnknownNameError as e:
        raise ConfigError(f"key 'runner': {e}") from None
