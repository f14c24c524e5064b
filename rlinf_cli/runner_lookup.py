"""Find the runner a config asks for (``runner: embodied``), with a clear error for a typo."""

from __future__ import annotations

import difflib
from typing import Any

from rlinf_contracts.config.errors import ConfigError


def runner_spec(name: str) -> Any:
    """The registered runner ``name``; unknown names list every runner, registered or lazy."""
    from learner.runners.registry import RUNNER_MODULES, RUNNERS, get_runner

    known = sorted(set(RUNNER_MODULES) | set(RUNNERS.names()))
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"key 'runner': unknown runner {name!r}{hint} Known: {', '.join(known)} "
            "(rlinf list runners)"
        )
    return get_runner(name)
