"""The one interface every learning algorithm offers a runner.

Why one protocol: a runner's loop is then the same few lines for every method — draw a batch,
``update`` it, log the metrics, checkpoint ``state_dict`` now and then, publish ``policy()``'s
weights — and only the *data* differs (a rollout for PPO / GRPO, a replay sample for SAC /
RLPD / CrossQ, a demo batch for BC / IQL / DAgger, labelled frames for the reward classifier,
token batches for VLA SFT). Stable-Baselines3 gets the same effect with two base classes; a
structural protocol needs no inheritance, so a pure-torch trainer stays importable without Ray.

What an ``update`` receives is the algorithm's own batch type; everything it needs beyond the
batch (the iteration for a learning-rate schedule, a seeded generator for minibatch order) is
state the algorithm holds and restores through ``state_dict`` — never an extra argument, so every
``update`` has one signature.

>>> class Constant:
...     def update(self, batch): return {"loss": 0.0}
...     def state_dict(self): return {}
...     def load_state_dict(self, state): pass
...     def policy(self): return None
>>> isinstance(Constant(), Algorithm)
True
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["Algorithm"]


@runtime_checkable
class Algorithm(Protocol):
    """A learner a runner drives: ``update`` on a batch, checkpoint, and the policy to serve."""

    def update(self, batch: Any) -> dict[str, float]:
        """One learning step (or one epoch x minibatch sweep) on ``batch``; scalar metrics."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly: networks, optimisers, counters, generators."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        ...

    def policy(self) -> Any:
        """The network whose weights are published and served (an ``nn.Module``)."""
        ...
