"""Tools for agentic rollouts, registered by tag in :data:`TOOLS`: ``calc``, ``python``, ``search``.

The model calls them with ``<tag>ARGS</tag>`` (:mod:`learner.llm.agentic.protocol`); the
:class:`~learner.llm.tools.executor.ToolWorker` runs the calls with time limits and turns every
failure into an error observation. ``search`` loads its encoder lazily (the llm extra).
"""

from learner.llm.tools import calculator as _calculator  # noqa: F401  (registers calc)
from learner.llm.tools import python_sandbox as _python  # noqa: F401  (registers python)
from learner.llm.tools import retrieval as _retrieval  # noqa: F401  (registers search)
from learner.llm.tools.base import TOOLS, Tool, ToolError
from learner.llm.tools.executor import ToolWorker, build_tools

__all__ = ["TOOLS", "Tool", "ToolError", "ToolWorker", "build_tools"]
