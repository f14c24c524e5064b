"""Weights to every robot site: one pusher per policy server, the same weights offered to each.

Why one pusher per server, not one connection looping over servers: each pusher keeps only the
newest weights offered and sends them from its own thread, so a slow or unreachable site delays
nobody but itself -- it skips the versions it could not take and gets the newest one when it is
back -- while the learner never waits on the network. What a site serves is each site's own
business (the servers number their versions themselves); the learner reports the oldest of them
(``version``), the weights every site serves at least.

>>> class Stub:
...     def __init__(self, version): self.stats = {"pushes": 1, "failures": 0, "version": version}
...     version = property(lambda self: self.stats["version"])
>>> FanOutPusher([Stub(3), Stub(5)]).version, FanOutPusher([Stub(3), Stub(5)]).stats["pushes"]
(3, 2)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

SUMMED = ("offered", "pushes", "failures")  # pusher stats that add up over the sites


class FanOutPusher:
    """``offer`` / ``flush`` / ``stop`` / ``version`` / ``stats`` over several pushers (the
    single pusher's interface, so the learner does not know how many sites there are)."""

    def __init__(self, pushers: Sequence[Any]) -> None:
        if not pushers:
            raise ValueError("FanOutPusher needs at least one pusher")
        self.pushers = list(pushers)

    def offer(self, weights: Any) -> None:
        """The same weights to every site (each pusher only reads them while it serialises)."""
        for p in self.pushers:
            p.offer(weights)

    @property
    def version(self) -> int:
        """The oldest version any site acknowledged (-1 while one has acknowledged none)."""
        return min(int(p.version) for p in self.pushers)

    @property
    def stats(self) -> dict[str, Any]:
        """Offers, pushes and failures summed over the sites; ``version`` the oldest; ``sites``
        the number of servers; ``last_error`` the first site's that has one."""
        out: dict[str, Any] = {k: sum(int(p.stats.get(k, 0)) for p in self.pushers) for k in SUMMED}
        errors = [str(p.stats.get("last_error", "")) for p in self.pushers]
        out.update(
            version=self.version,
            sites=len(self.pushers),
            last_error=next((e for e in errors if e), ""),
        )
        return out

    def flush(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` in all for every site to serve the newest weights; True if
        all do."""
        deadline = time.monotonic() + timeout_s
        done = [p.flush(max(0.0, deadline - time.monotonic())) for p in self.pushers]
        return all(done)

    def stop(self, timeout_s: float = 5.0) -> None:
        for p in self.pushers:
            p.stop(timeout_s)
