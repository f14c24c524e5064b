"""Two spawned ranks on loopback, as the data-parallel tests need them (gloo on CPU).

``run_two_ranks(fn, *args)`` runs ``fn(rank, port, *args)`` in two fresh interpreters (spawn:
no state from the test process leaks in) that share a free rendezvous port, and returns each
rank's result; a rank that raised fails the test with its traceback. Results travel pickled
by value: a queued tensor would share memory with a process that is about to exit.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import traceback
from collections.abc import Callable
from typing import Any

from tests.cli_procs import free_port


def _main(fn: Callable[..., Any], rank: int, port: int, args: tuple, queue: Any) -> None:
    try:
        queue.put((rank, "ok", pickle.dumps(fn(rank, port, *args))))
    except Exception:  # the parent reports the traceback
        queue.put((rank, "error", traceback.format_exc()))


def run_two_ranks(fn: Callable[..., Any], *args: Any, timeout_s: float = 300) -> dict[int, Any]:
    """``{0: rank 0's result, 1: rank 1's}`` of ``fn(rank, port, *args)`` (a module-level
    function: spawn imports it by name)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_main, args=(fn, r, port, args, queue)) for r in range(2)]
    for p in procs:
        p.start()
    got = {r: (status, body) for r, status, body in (queue.get(timeout=timeout_s) for _ in procs)}
    for p in procs:
        p.join(30)
    for r, (status, body) in got.items():
        assert status == "ok", f"rank {r} failed:\n{body}"
    assert all(p.exitcode == 0 for p in procs)
    return {r: pickle.loads(got[r][1]) for r in (0, 1)}
