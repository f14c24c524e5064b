"""Action-chunk broker: one action per control tick, one server round trip per chunk.

Why: a policy returns a chunk ``[chunk, A]`` of future actions; a robot loop wants one action
per tick. The broker asks the server only when the cached chunk is used up (or after
``execute_horizon`` actions, for receding-horizon control that re-plans before the chunk ends).

>>> import numpy as np
>>> class Fake:
...     calls = 0
...     def infer(self, obs):
...         Fake.calls += 1
...         return {"actions": np.arange(6, dtype=np.float32).reshape(3, 2), "weight_version": 1}
>>> broker = ActionChunkBroker(Fake())
>>> [broker.act({}).tolist() for _ in range(4)], Fake.calls
([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [0.0, 1.0]], 2)
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class _Infers(Protocol):
    def infer(self, obs: dict[str, Any]) -> dict[str, Any]: ...


class ActionChunkBroker:
    """Wraps a client with ``infer(obs) -> {"actions": [chunk, A], ...}``."""

    def __init__(self, client: _Infers, execute_horizon: int | None = None) -> None:
        if execute_horizon is not None and execute_horizon < 1:
            raise ValueError(f"execute_horizon must be >= 1 or None, got {execute_horizon}")
        self.client = client
        self.execute_horizon = execute_horizon
        self.last_response: dict[str, Any] | None = None
        self._chunk: np.ndarray | None = None
        self._step = 0

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        """The next action ``[A]``; ``obs`` is sent only when a new chunk is needed."""
        if self._chunk is None:
            self.last_response = self.client.infer(obs)
            self._chunk = np.asarray(self.last_response["actions"])
            if self._chunk.ndim == 1:  # a server answering single actions
                self._chunk = self._chunk[None]
            self._step = 0
        action = self._chunk[self._step]
        self._step += 1
        limit = (
            len(self._chunk)
            if self.execute_horizon is None
            else min(self.execute_horizon, len(self._chunk))
        )
        if self._step >= limit:
            self._chunk = None
        return action

    @property
    def weight_version(self) -> int | None:
        return None if self.last_response is None else self.last_response.get("weight_version")

    def reset(self) -> None:
        """Drop the cached chunk (call at episode start)."""
        self._chunk, self._step = None, 0
