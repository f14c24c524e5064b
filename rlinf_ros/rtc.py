"""Real-time chunking (RTC) on the client: request early, freeze what was executed, blend the rest.

Why on the client: with action chunks a robot either stops while the next chunk is computed
(a *stall*) or switches to a chunk that was planned from an older observation and does not
agree with the actions it has just executed (a *jump* at the boundary). Black et al. 2025
("Real-Time Execution of Action Chunking Flow Policies") fix both: the next request goes out
while the current chunk still has steps left (after ``execute_horizon`` executed steps), the
steps executed while inference runs (the *inference delay* ``d``) are frozen, and the new
chunk is made to agree with the old one over their overlap. Any policy gets the agreement by
blending (this module); a flow policy can do better by *guided inpainting* of the committed
prefix inside its sampler, so the client also sends that prefix with the request
(``rtc_prefix`` / ``rtc_inference_delay``, see ``learner.models.adapters.rtc_guidance``).

Time alignment (row ``i`` of a chunk is the action for the ``i``-th tick counted from the tick
its observation was taken): a chunk requested at tick ``t`` and loaded at tick ``t + d`` has
its rows ``0..d-1`` already in the past; row ``d`` is executed now. The old chunk's rows
still planned at ``t + d`` overlap the new rows ``d, d+1, ...``.

No ROS and no torch here (robot-PC room).

>>> w = blend_weights(4, "linear")
>>> [round(float(x), 2) for x in w]
[0.8, 0.6, 0.4, 0.2]
>>> old = np.zeros((4, 1)); new = np.ones((6, 1))
>>> merge_chunk(new, old, delay=2, blend="linear")[:, 0].round(2).tolist()
[0.2, 0.4, 0.6, 0.8]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rlinf_contracts.config import ConfigError

BLENDS = ("exp", "linear", "none")


@dataclass
class RtcConfig:
    """``policy_client.rtc``: real-time chunking of the policy client (off by default)."""

    enabled: bool = field(
        default=False,
        metadata={
            "help": "request the next chunk while executing the current one and make it agree "
            "with the committed actions"
        },
    )
    execute_horizon: int = field(
        default=5,
        metadata={
            "help": "steps of a chunk executed before the next request goes out (must leave "
            "room for the inference delay)"
        },
    )
    blend: str = field(
        default="linear",
        metadata={
            "help": "how the new chunk takes over the old one's overlap: linear (even "
            "cross-fade: smallest largest step) | exp (RTC's exponentially decaying soft mask: "
            "follows the new chunk sooner) | none"
        },
    )
    send_prefix: bool = field(
        default=True,
        metadata={
            "help": "send the committed prefix (rtc_prefix, rtc_inference_delay) so a flow "
            "policy can inpaint it"
        },
    )

    def validate(self) -> None:
        if self.execute_horizon < 1:
            raise ConfigError(
                f"key 'rtc.execute_horizon' must be >= 1 control step, got {self.execute_horizon}"
            )
        if self.blend not in BLENDS:
            raise ConfigError(f"key 'rtc.blend' must be one of {BLENDS}, got {self.blend!r}")


def blend_weights(n: int, blend: str) -> np.ndarray:
    """Weights ``[n]`` of the *old* chunk over an overlap of ``n`` rows, decaying from ~1 to ~0.

    ``exp`` is RTC's soft mask ``c (e^c - 1) / (e - 1)`` with ``c`` falling linearly over the
    overlap; ``linear`` is ``c`` itself; ``none`` switches at once (naive chunking).
    """
    if blend not in BLENDS:
        raise ValueError(f"blend must be one of {BLENDS}, got {blend!r}")
    if n <= 0 or blend == "none":
        return np.zeros(max(n, 0))
    c = (n - np.arange(n)) / (n + 1.0)
    if blend == "linear":
        return c
    return c * (np.exp(c) - 1.0) / (math.e - 1.0)


def merge_chunk(new: np.ndarray, old_rest: np.ndarray, delay: int, blend: str) -> np.ndarray:
    """Rows of ``new`` from ``delay`` on, blended with the old chunk's rows for the same ticks.

    ``new`` [H, A] was requested ``delay`` ticks ago; ``old_rest`` [n, A] are the old chunk's
    rows not yet executed (row 0 = this tick). Returns the rows to execute from this tick on.
    """
    new = np.asarray(new, dtype=np.float64)
    fresh = new[min(max(delay, 0), len(new) - 1) :].copy()  # never drop the whole chunk
    n = min(len(fresh), len(old_rest))
    if n:
        w = blend_weights(n, blend)[:, None]
        fresh[:n] = w * np.asarray(old_rest[:n], dtype=np.float64) + (1.0 - w) * fresh[:n]
    return fresh


def max_jump(rows: list[np.ndarray], ticks: list[int] | None = None) -> float:
    """Largest max-norm step ``|a[k] - a[k-1]|`` over ``ticks`` (None: every tick).

    At chunk boundaries alone it measures naive switching; over every tick it also catches a
    blend that only moves the jump a few steps later.
    """
    ticks = list(range(1, len(rows))) if ticks is None else ticks
    jumps = [float(np.max(np.abs(rows[k] - rows[k - 1]))) for k in ticks if 0 < k < len(rows)]
    return max(jumps, default=0.0)
