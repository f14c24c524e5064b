"""Training loops. ``get_runner(name)`` imports and returns a registered runner."""

from learner.runners.registry import RUNNER_MODULES, RUNNERS, RunnerSpec, get_runner

__all__ = ["RUNNERS", "RUNNER_MODULES", "RunnerSpec", "get_runner"]
