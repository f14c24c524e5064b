"""The tool contract and its registry: a tool maps one call's argument text to output text.

A tool is a class registered in :data:`TOOLS` under the tag the model writes (``calc``,
``python``, ``search``); ``agent.tools`` in a config names them, ``agent.tool_options`` passes
keyword arguments. Tools raise on bad input; the executor (:mod:`learner.llm.tools.executor`)
turns every failure, hang or crash into an error observation, so a tool never stops a run.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from rlinf_contracts.registry import Registry

__all__ = ["Tool", "ToolError", "TOOLS"]


class ToolError(Exception):
    """A call the tool refuses or cannot answer; the message becomes the observation."""


class Tool(abc.ABC):
    """One tool. ``isolation = "process"`` makes the executor run each call in a forked child
    that it kills on timeout; ``"inline"`` tools run on a thread (bounded by their own limits)."""

    isolation: ClassVar[str] = "inline"
    timeout_s: float = 5.0

    @abc.abstractmethod
    def __call__(self, args: str) -> str:
        """Output text of the call ``args``; raise :class:`ToolError` to report a bad call."""

    def close(self) -> None:  # noqa: B027  # a no-op default, not abstract: most tools hold nothing
        """Release resources (temp dirs, models)."""


TOOLS: Registry[type[Tool]] = Registry("tool")
