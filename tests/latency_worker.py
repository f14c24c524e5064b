"""A tick-exact stand-in for the policy client's inference worker (tests and benchmarks/rtc.py).

Why outside the product: the robot PC always talks to a real policy server through
:class:`~rlinf_ros.policy_loop.InferenceWorker`; only tests and the RTC benchmark need answers
that arrive a fixed number of control ticks late.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from rlinf_ros.policy_loop import InferResult


class ChunkPolicy(Protocol):
    """What the worker calls: the ``infer`` of a served policy, without the rest of it."""

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]: ...


class LatencyWorker:
    """An in-process stand-in for :class:`~rlinf_ros.policy_loop.InferenceWorker` whose answer
    arrives exactly ``latency_ticks`` control ticks after the request.

    Why: stalls and boundary jumps depend on the delay *in ticks*; wall-clock threads on a
    shared machine would blur that. The driver calls :meth:`advance` once per tick, before
    ``PolicyLoop.tick``; ``policy`` is any ``infer(obs) -> {"actions": [H, A]}`` callable,
    run when the request is made (its compute time is not the simulated latency).
    """

    def __init__(self, policy: ChunkPolicy, latency_ticks: int) -> None:
        self.policy = policy
        self.latency_ticks = int(latency_ticks)
        self.connected, self.refused, self.last_error = True, "", ""
        self.requests: list[dict] = []  # every observation sent (tests read rtc_prefix from them)
        self._pending: list[tuple[int, object]] = []
        self._now = 0

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def advance(self) -> None:
        self._now += 1

    def submit(self, obs: dict, base: list, t_obs: float, tick: int = 0) -> bool:
        if self.busy:
            return False
        self.requests.append(obs)
        actions = np.atleast_2d(np.asarray(self.policy.infer(obs)["actions"], dtype=np.float64))
        self._pending.append(
            (
                self._now + self.latency_ticks,
                InferResult(actions, base, t_obs, 0.0, t_obs, {}, tick),
            )
        )
        return True

    def wait(self, timeout: float) -> bool:
        return False  # simulated time does not pass inside a tick

    def take(self) -> object:
        if self._pending and self._pending[0][0] <= self._now:
            return self._pending.pop(0)[1]
        return None
