"""``ToolWorker``: runs a turn's tool calls with timeouts; every failure becomes an observation.

A :class:`learner.worker.Worker`, so it can be a worker group of its own; the reasoning runner
hosts one inside each rollout worker (the calls are short and the observations go straight
back into that worker's contexts). Per call:

- unknown tool name -> error observation naming the enabled tools;
- ``isolation = "inline"`` tools run on a thread pool; past ``timeout_s`` the call is reported
  as timed out and the pool is replaced (the stuck thread is abandoned, so inline tools must
  bound their own work, as :mod:`calculator` does);
- ``isolation = "process"`` tools run in a forked child per call, **killed** past the timeout;
  a crash (exception, non-zero exit, a signal) is an error observation too.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from learner.llm.agentic.protocol import Observation, ToolCall
from learner.llm.tools.base import TOOLS, Tool, ToolError
from learner.worker import Worker

__all__ = ["ToolWorker", "build_tools"]

log = logging.getLogger(__name__)


def build_tools(
    names: Sequence[str], options: dict[str, dict[str, Any]] | None = None
) -> dict[str, Tool]:
    """Instantiate the registered tools ``names`` with ``options[name]`` as keyword arguments."""
    options = options or {}
    return {n: TOOLS.get(n)(**options.get(n, {})) for n in names}


def _child(tool: Tool, args: str, conn: Any) -> None:
    try:
        conn.send((True, tool(args)))
    except ToolError as e:
        conn.send((False, str(e)))
    except BaseException as e:
        conn.send((False, f"{type(e).__name__}: {e}"))


class ToolWorker(Worker):
    """Executes :class:`ToolCall` batches; never raises for a tool's failure."""

    def __init__(
        self,
        tools: dict[str, Tool] | Sequence[str],
        timeout_s: float = 5.0,
        threads: int = 4,
        options: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.tools = dict(tools) if isinstance(tools, dict) else build_tools(tools, options)
        self.timeout_s = timeout_s
        self.threads = threads
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="tool")
        self.stats = {"calls": 0, "errors": 0, "timeouts": 0}

    def _timeout(self, tool: Tool) -> float:
        return min(self.timeout_s, getattr(tool, "timeout_s", self.timeout_s) + 1.0)

    def execute(self, calls: Sequence[ToolCall]) -> list[Observation]:
        """One observation per call, in order; inline calls run concurrently."""
        futures: list[Any] = []
        for c in calls:
            tool = self.tools.get(c.name)
            if tool is None:
                futures.append(
                    Observation(
                        f"error: unknown tool {c.name!r}; enabled: {sorted(self.tools)}", False
                    )
                )
            elif tool.isolation == "process":
                futures.append(None)  # run below, one child per call
            else:
                futures.append((time.perf_counter(), self._pool.submit(tool, c.args)))
        out = []
        for c, f in zip(calls, futures):
            if isinstance(f, Observation):
                obs = f
            elif f is None:
                obs = self._in_child(self.tools[c.name], c.args)
            else:
                obs = self._collect(self.tools[c.name], *f)
            self.stats["calls"] += 1
            self.stats["errors"] += int(not obs.ok)
            out.append(obs)
        return out

    def _collect(self, tool: Tool, t0: float, fut: Any) -> Observation:
        limit = self._timeout(tool)
        try:
            text = fut.result(timeout=max(0.0, limit - (time.perf_counter() - t0)))
            return Observation(str(text), True, time.perf_counter() - t0)
        except FutureTimeout:
            self.stats["timeouts"] += 1
            log.warning(
                "tool %s timed out after %.1f s; replacing its thread pool",
                type(tool).__name__,
                limit,
            )
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="tool")
            return Observation(f"error: timed out after {limit:g} s", False, limit)
        except ToolError as e:
            return Observation(f"error: {e}", False, time.perf_counter() - t0)
        except Exception as e:
            return Observation(f"error: {type(e).__name__}: {e}", False, time.perf_counter() - t0)

    def _in_child(self, tool: Tool, args: str) -> Observation:
        t0 = time.perf_counter()
        limit = self._timeout(tool)
        ctx = mp.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(tool, args, send), daemon=True)
        proc.start()
        send.close()
        ready = recv.poll(limit)
        result = None
        if ready:
            try:
                result = recv.recv()
            except (EOFError, OSError):  # the child died without answering (os._exit, a signal)
                result = None
        proc.join(0.5 if ready else 0)
        if proc.is_alive():
            proc.kill()
            proc.join()
        recv.close()
        dt = time.perf_counter() - t0
        if result is None:
            if not ready:
                self.stats["timeouts"] += 1
                return Observation(f"error: timed out after {limit:g} s (killed)", False, dt)
            return Observation(f"error: tool process died (exit code {proc.exitcode})", False, dt)
        ok, text = result
        return Observation(str(text) if ok else f"error: {text}", bool(ok), dt)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for t in self.tools.values():
            t.close()
