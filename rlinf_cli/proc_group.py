"""Child commands run as a group: each in its own session with its own log file, stopped by name.

Why a session per child: Ctrl-C in a terminal signals the whole foreground process group, so
children sharing ours would all stop at once, in no order. In their own sessions only the
supervisor gets it, and it stops them one by one, in the order it chooses, each with the signal
that makes that command end cleanly; one that outlives its timeout is killed with its whole
session (the nodes a ``rlinf ros up`` started included).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)  # added to ours
    proc: subprocess.Popen | None = None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()


@dataclass
class ProcessGroup:
    """Started children by name, in start order."""

    cwd: Path | None = None
    children: dict[str, Child] = field(default_factory=dict)

    def start(self, child: Child) -> Child:
        child.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **child.env}
        with open(child.log_path, "ab") as out:
            child.proc = subprocess.Popen(
                child.argv,
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.children[child.name] = child
        return child

    def stop(self, name: str, sig: int, timeout_s: float) -> int | None:
        """Send ``sig`` to one child, wait up to ``timeout_s``, then kill its session; its exit
        code (negative: the signal that ended it)."""
        child = self.children.get(name)
        if child is None or child.proc is None:
            return None
        proc = child.proc
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0f s; killing it", name, timeout_s)
        _kill_session(proc)
        return proc.wait()

    def kill_all(self) -> None:
        """Last resort (the supervisor itself is going): kill every child's session."""
        for child in self.children.values():
            if child.proc is not None:
                _kill_session(child.proc)


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL what is left of the child's session (its own process and its children)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + 5
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
