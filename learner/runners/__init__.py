"""Training loops. Importing a runner module registers it in ``RUNNERS``."""

from learner.runners.registry import RUNNERS, RunnerSpec

__all__ = ["RUNNERS", "RunnerSpec"]
