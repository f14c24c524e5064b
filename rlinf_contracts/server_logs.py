"""The websockets library's server logger, quiet at INFO: one adapter for every server of ours.

Why: the library logs "connection open" / "connection rejected (200 OK)" / "connection closed"
at INFO for every connection, so each ``/healthz`` poll of the policy server or the learner's
ingest wrote two lines, and an operator's log filled with the same lines twice a second. Our
servers log the connections that matter themselves; the library's INFO lines go to DEBUG,
its warnings and errors keep their level.

>>> import logging
>>> seen = []
>>> handler = logging.Handler(); handler.emit = seen.append
>>> base = logging.getLogger("example.quiet"); base.addHandler(handler); base.setLevel(logging.INFO)
>>> log = quiet_library_log(base)
>>> log.info("connection open"); log.warning("handshake failed")
>>> [r.getMessage() for r in seen]
['handshake failed']
"""

from __future__ import annotations

import logging
from typing import Any


class QuietLibraryLog(logging.LoggerAdapter):
    """A logger adapter that moves INFO records to DEBUG (see the module docstring)."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        super().log(logging.DEBUG if level == logging.INFO else level, msg, *args, **kwargs)


def quiet_library_log(logger: logging.Logger | None = None) -> QuietLibraryLog:
    """The adapter over ``logger`` (default: ``websockets.server``), for ``serve(logger=...)``."""
    return QuietLibraryLog(logger or logging.getLogger("websockets.server"), {})
