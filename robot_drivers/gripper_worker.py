"""The Franka Hand in a process of its own, so a gripper motion can never stall the 1 kHz loop.

Why a process: pylibfranka keeps Python's GIL while a call blocks, and a gripper ``move`` /
``grasp`` / ``homing`` blocks for the whole motion (0.4-0.6 s on franky-sim). Called in the
control process it stops every Python thread, the libfranka control loop included: measured on
franky-sim, a Python thread ticking every 1 ms ran once during a 0.4 s move, and the control
loop's period (libfranka's own ``duration``) reached 472 ms. A real arm ends that in a
``communication_constraints_violation`` reflex. A process has its own GIL.

The protocol, between :class:`GripperWorker` (in the control process) and :func:`serve` (the
worker process, started with the ``spawn`` context and owning its own ``Gripper`` connection):

- commands go over a pipe and are never waited for: ``(id, kind, args)``, ``kind`` a key of
  :data:`GRIPPER_CALLS`. :meth:`GripperWorker.wait` is the explicit, bounded wait for a caller
  that needs the motion done (a reset that homes the hand).
- the newest command wins: the worker cannot call ``stop()`` while ``move()`` blocks (the GIL
  again: no other thread of the worker runs), so commands that arrive meanwhile wait in the pipe;
  when the motion ends the worker runs only the newest of them and the others count as
  superseded. Each command's result (ok, why not) comes back over the same pipe; the client
  collects them whenever it sends, reads or waits.
- the worker publishes its state in shared memory -- width, max width, grasp, temperature, the
  running and the last finished command and its result -- under a lock it holds only to copy
  numbers, never during a gripper call; :meth:`GripperWorker.snapshot` never blocks on the
  worker (a lock not free at once: the previous copy).
- a dead worker (a crash, a lost connection to the hand, killed) raises :class:`GripperLost` on
  the next command or state read, with its exit code and last error; the worker ends on its own
  when the control process's end of the pipe closes (that process died), and
  :meth:`GripperWorker.close` stops it (asking, then terminating).
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing as mp
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from robot_drivers.arm import DriverError
from robot_drivers.types import GripperState

log = logging.getLogger(__name__)

# command kind -> the Gripper call it makes (args as sent)
GRIPPER_CALLS: dict[str, Callable[[Any, tuple[float, ...]], Any]] = {
    "move": lambda g, a: g.move(*a),
    "grasp": lambda g, a: g.grasp(*a),
    "homing": lambda g, a: g.homing(),
    "stop": lambda g, a: g.stop(),
}
# the shared state: one double per field, in this order
FIELDS = (
    "updates",  # states published so far (0: not connected yet)
    "width",
    "max_width",
    "is_grasped",
    "temperature",
    "running_id",  # the command the worker runs now (0: idle)
    "done_id",  # the newest command finished (ids of superseded ones are skipped)
    "done_ok",  # its result
)
SLOT = {name: i for i, name in enumerate(FIELDS)}
ERROR_BYTES = 512
RESULTS_KEPT = 256


class GripperLost(DriverError):
    """The gripper worker is gone (a crash, a lost hand, killed): the message says why."""


@dataclass(frozen=True)
class GripperSnapshot:
    """The worker's latest published state."""

    state: GripperState
    temperature: float = 0.0
    running_id: int = 0
    done_id: int = 0
    done_ok: bool = False
    error: str = ""  # the last command's or connection's failure ("" when it succeeded)
    updates: int = 0

    @property
    def busy(self) -> bool:
        return self.running_id != 0


def resolve(spec: str) -> Callable[[str], Any]:
    """``"module:attr"`` -> that attribute: the gripper class the worker opens. A path, not the
    class, because the worker is a fresh interpreter (spawn): it imports what it uses."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise DriverError(f"gripper class {spec!r}: use 'module:Class' (e.g. pylibfranka:Gripper)")
    return getattr(importlib.import_module(module), attr)


class _Shared:
    """The shared state block: numbers, an error text, and the lock that guards both."""

    def __init__(self, ctx: Any) -> None:
        self.values = ctx.RawArray("d", len(FIELDS))
        self.error = ctx.RawArray("c", ERROR_BYTES)
        self.lock = ctx.Lock()

    def write(
        self, values: dict[str, float] | None = None, error: str | None = None, count: bool = True
    ) -> None:
        """Publish ``values`` (and ``error``); ``count``: a state read (``updates`` + 1)."""
        with self.lock:
            for name, v in (values or {}).items():
                self.values[SLOT[name]] = float(v)
            if error is not None:
                self.error.value = error.encode("utf-8", "replace")[: ERROR_BYTES - 1]
            self.values[SLOT["updates"]] += count

    def read(self) -> tuple[list[float], str] | None:
        if not self.lock.acquire(False):  # the worker is copying: the caller keeps its last
            return None
        try:
            return list(self.values), self.error.value.decode("utf-8", "replace")
        finally:
            self.lock.release()


def _gripper_values(g: Any) -> dict[str, float]:
    return {
        "width": float(g.width),
        "max_width": float(g.max_width),
        "is_grasped": float(bool(g.is_grasped)),
        "temperature": float(getattr(g, "temperature", 0.0)),
    }


def _newest(conn: Connection, newest: tuple | None) -> tuple[tuple | None, bool]:
    """Drain the pipe: the newest command (the others are answered as superseded) and whether
    to shut down. EOFError / OSError: the control process is gone."""
    while conn.poll(0):
        msg = conn.recv()
        if msg is None:
            return newest, True
        if newest is not None:
            conn.send((newest[0], False, f"superseded by command {msg[0]}"))
        newest = msg
    return newest, False


def serve(ip: str, gripper_class: str, conn: Connection, shared: _Shared, poll_s: float) -> None:
    """The worker process: open the gripper, then run commands and publish its state."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the control process's to handle
    try:
        gripper = resolve(gripper_class)(ip)
        shared.write(_gripper_values(gripper.read_once()), error="")
    except Exception as e:
        shared.write(error=f"gripper at {ip}: {type(e).__name__}: {e}", count=False)
        raise SystemExit(3) from None
    newest: tuple | None = None
    while True:
        try:
            if conn.poll(poll_s):
                newest, shutdown = _newest(conn, newest)
                if shutdown:
                    return
        except (EOFError, OSError):
            return  # the control process closed the pipe: it is gone
        if newest is not None:
            result = _run(gripper, newest, shared)
            newest = None
            try:
                conn.send(result)
            except OSError:
                return
        try:
            shared.write(_gripper_values(gripper.read_once()))
        except Exception as e:
            shared.write(error=f"reading the gripper: {type(e).__name__}: {e}")
            raise SystemExit(4) from None


def _run(gripper: Any, command: tuple, shared: _Shared) -> tuple[int, bool, str]:
    cmd_id, kind, args = command
    shared.write({"running_id": cmd_id})
    try:
        ok, error = bool(GRIPPER_CALLS[kind](gripper, tuple(args))), ""
        if not ok:
            error = f"{kind}: the gripper reported failure"
    except Exception as e:  # CommandException (e.g. a width out of range), NetworkException
        ok, error = False, f"{kind}: {type(e).__name__}: {e}"
    try:
        values = _gripper_values(gripper.read_once())
    except Exception:
        values = {}  # the loop's next read reports it
    shared.write({**values, "running_id": 0, "done_id": cmd_id, "done_ok": ok}, error=error)
    return cmd_id, ok, error


class GripperWorker:
    """The control process's side: send commands, read the latest state, wait when asked."""

    def __init__(
        self,
        ip: str,
        poll_s: float = 0.1,
        gripper_class: str = "pylibfranka:Gripper",
        start_timeout_s: float = 30.0,
    ) -> None:
        self.ip, self.poll_s, self.gripper_class = ip, poll_s, gripper_class
        self.start_timeout_s = start_timeout_s
        self._proc: Any = None
        self._conn: Connection | None = None
        self._shared: _Shared | None = None
        self._last = GripperSnapshot(GripperState())
        self._next_id = 0
        # command id -> (ok, why not): the newest RESULTS_KEPT results the worker sent back
        self.results: dict[int, tuple[bool, str]] = {}

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> GripperSnapshot:
        """Start the worker and wait until it has read the gripper once (or failed to)."""
        ctx = mp.get_context("spawn")
        self._shared = _Shared(ctx)
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=serve,
            args=(self.ip, self.gripper_class, child, self._shared, self.poll_s),
            name=f"gripper-{self.ip}",
            daemon=True,  # multiprocessing ends it when the control process exits normally
        )
        self._proc.start()
        child.close()  # the worker's end lives in the worker only: its EOF tells of our death
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            try:
                snap = self.snapshot()
            except GripperLost:
                self.close()  # reaps it
                raise
            if snap.updates > 0:
                return snap
            time.sleep(0.01)
        self.close()
        raise GripperLost(f"gripper worker for {self.ip}: no state after {self.start_timeout_s} s")

    def close(self, timeout_s: float = 3.0) -> None:
        """Stop the worker: ask (it finishes a running motion first), then terminate, then
        kill; nothing outlives this call."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        try:
            if conn is not None:
                conn.send(None)
        except OSError:
            pass  # already gone
        proc.join(timeout_s)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout_s)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout_s)
        if conn is not None:
            conn.close()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def last(self) -> GripperSnapshot:
        """The last state read (what a dead worker last published)."""
        return self._last

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    # ---- protocol -----------------------------------------------------------------------
    def _check(self) -> None:
        if self._proc is None:
            raise GripperLost(f"gripper worker for {self.ip} is not running (not started)")
        if not self._proc.is_alive():
            why = self._read()[1] if self._shared is not None else ""
            raise GripperLost(
                f"gripper worker for {self.ip} exited with code {self._proc.exitcode}"
                + (f": {why}" if why else "")
            )

    def _collect(self) -> None:
        """Take the results the worker sent back (never waits)."""
        try:
            while self._conn is not None and self._conn.poll(0):
                cmd_id, ok, error = self._conn.recv()
                self.results[cmd_id] = (ok, error)
        except (EOFError, OSError):
            return  # the worker is gone: _check says so
        while len(self.results) > RESULTS_KEPT:
            del self.results[min(self.results)]

    def send(self, kind: str, *args: float) -> int:
        """Send a command without waiting for it; its id (for :meth:`wait`)."""
        if kind not in GRIPPER_CALLS:
            raise DriverError(f"gripper command {kind!r}: use one of {sorted(GRIPPER_CALLS)}")
        self._check()
        self._collect()
        self._next_id += 1
        try:
            assert self._conn is not None
            self._conn.send((self._next_id, kind, tuple(float(a) for a in args)))
        except OSError as e:
            raise GripperLost(f"gripper worker for {self.ip}: {type(e).__name__}: {e}") from e
        return self._next_id

    def _read(self) -> tuple[list[float], str]:
        assert self._shared is not None
        got = self._shared.read()
        return got if got is not None else ([], "")

    def snapshot(self) -> GripperSnapshot:
        """The latest published state; never waits for a running motion."""
        self._check()
        self._collect()
        values, error = self._read()
        if values:
            v = dict(zip(FIELDS, values, strict=True))
            self._last = GripperSnapshot(
                GripperState(v["width"], v["max_width"], bool(v["is_grasped"])),
                temperature=v["temperature"],
                running_id=int(v["running_id"]),
                done_id=int(v["done_id"]),
                done_ok=bool(v["done_ok"]),
                error=error,
                updates=int(v["updates"]),
            )
        return self._last

    def wait(self, cmd_id: int | None = None, timeout_s: float = 5.0) -> bool:
        """Wait (at most ``timeout_s``) for command ``cmd_id`` (default: the last one sent):
        True when it ran and succeeded; False when it failed, was superseded by a newer
        command, or is not done in time."""
        cmd_id = self._next_id if cmd_id is None else cmd_id
        deadline = time.monotonic() + timeout_s
        while True:
            self.snapshot()  # raises GripperLost for a dead worker
            if cmd_id in self.results:
                return self.results[cmd_id][0]
            if cmd_id < min(self.results, default=cmd_id):
                return False  # long answered, its result no longer kept
            if time.monotonic() >= deadline:
                log.warning("gripper command %d not done after %.1f s", cmd_id, timeout_s)
                return False
            time.sleep(0.005)
