"""Which exceptions are a user's mistake (one or two lines on stderr) and how they read.

Everything here is cheap to import: the ``rlinf`` entry point catches these around every
subcommand. Programming errors are not listed and keep their traceback.
"""

from __future__ import annotations

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.registry import UnknownNameError
from rlinf_contracts.spec import SpecError


class PreflightError(ConfigError):
    """A check before any cluster or process starts failed; the message names key and fix."""


class ClusterUnavailable(ConnectionError):
    """``--ray-address`` names no running Ray cluster."""


USER_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError,
    UnknownNameError,
    SpecError,
    FileNotFoundError,
    ConnectionError,
)


def describe(e: BaseException) -> str:
    """The line(s) a user sees for a caught error (the class name only where it adds meaning)."""
    if isinstance(e, (ConfigError, UnknownNameError, SpecError)):
        return f"config error: {e}"
    return str(e)
