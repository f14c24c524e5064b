"""Waiting on the channel actor: timeouts, periodic warnings, and errors that name the channel.

Why a module of its own: every channel call ends in "wait for the actor's answer", and the rules
are the same for all of them. A finite ``timeout`` is the actor's own deadline; the client adds
:data:`ANSWER_GRACE_S` before deciding the actor itself is unreachable. ``timeout=None`` waits
for ever but logs a warning every :data:`WARN_EVERY_S` seconds, so a lost peer is never silent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray

from learner.channel.actor import EMPTY, FULL
from learner.channel.errors import ChannelClosed, ChannelEmpty, ChannelFull, ChannelTimeout

logger = logging.getLogger("learner.channel")

WARN_EVERY_S = 60.0
"""With ``timeout=None`` a waiting call logs a warning this often."""
ANSWER_GRACE_S = 30.0
"""How much longer than ``timeout`` the client waits for the actor's own answer."""

_ACTOR_GONE = (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError)


def _budget(timeout: float | None) -> float | None:
    return None if timeout is None else timeout + ANSWER_GRACE_S


def _no_answer(name: str, what: str, waited: float) -> str:
    return (
        f"channel {name!r}: {what}: the channel actor did not answer in {waited:.0f} s; "
        "it may be overloaded or its node lost"
    )


def closed_message(name: str, what: str) -> str:
    return f"channel {name!r} is closed (its actor exited); {what} failed"


def wait(name: str, ref: Any, what: str, timeout: float | None) -> Any:
    """``ray.get(ref)`` under the channel's timeout rules."""
    budget, waited = _budget(timeout), 0.0
    while True:
        step = WARN_EVERY_S if budget is None else max(min(WARN_EVERY_S, budget - waited), 0.0)
        try:
            return ray.get(ref, timeout=step)
        except ray.exceptions.GetTimeoutError:
            waited += step
            if budget is not None and waited >= budget:
                ray.cancel(ref)
                raise ChannelTimeout(_no_answer(name, what, waited)) from None
            logger.warning("channel %r: %s: still waiting after %.0f s", name, what, waited)
        except _ACTOR_GONE as err:
            raise ChannelClosed(closed_message(name, what)) from err


async def await_answer(name: str, ref: Any, what: str, timeout: float | None) -> Any:
    """Awaitable twin of :func:`wait`, for async workers."""
    future = asyncio.wrap_future(ref.future())
    budget, waited = _budget(timeout), 0.0
    while True:
        step = WARN_EVERY_S if budget is None else max(min(WARN_EVERY_S, budget - waited), 0.0)
        try:
            return await asyncio.wait_for(asyncio.shield(future), step)
        except TimeoutError:
            waited += step
            if budget is not None and waited >= budget:
                ray.cancel(ref)
                raise ChannelTimeout(_no_answer(name, what, waited)) from None
            logger.warning("channel %r: %s: still waiting after %.0f s", name, what, waited)
        except _ACTOR_GONE as err:
            raise ChannelClosed(closed_message(name, what)) from err


def raise_status(name: str, status: str, what: str, timeout: float | None, maxsize: int) -> None:
    """Turn a non-OK actor status into the matching exception."""
    if status == FULL:
        raise ChannelFull(f"channel {name!r}: {what}: queue is full (maxsize={maxsize})")
    if status == EMPTY:
        raise ChannelEmpty(f"channel {name!r}: {what}: queue is empty")
    raise ChannelTimeout(f"channel {name!r}: {what}: nothing arrived within {timeout} s")
