"""The CLI as a user runs it, in child processes: ``rlinf ...`` to the end, or ``rlinf serve``
until its health check answers, then stopped with Ctrl-C (SIGINT) and checked for a clean exit.

Why one module: every end-to-end test of ``train -> eval -> serve`` needs the same few steps,
and a copy per test drifts (one waited for the port, another for ``/healthz``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled")


def rlinf(*args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    """``rlinf ARGS`` from the repository root; its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "rlinf_cli.main", *args],
        cwd=ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(checkpoint: Path | str, timeout_s: float = 120.0) -> Iterator[int]:
    """``rlinf serve --checkpoint`` on a free loopback port, up (``/healthz`` answers) for the
    body, which gets the port; then SIGINT, and the server must exit 0 with no traceback."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlinf_cli.main", "serve", "--checkpoint", str(checkpoint)]
        + ["--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=cli_env(),
        cwd=ROOT,
        text=True,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    pytest.fail(f"rlinf serve did not come up:\n{proc.communicate(timeout=30)[0]}")
                time.sleep(0.2)
        yield port
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in output, output
