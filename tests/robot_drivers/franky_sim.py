"""A franky-sim process for the libfranka backend's tests: a robot on the loopback network.

Why a subprocess from its own venv: franky-sim (MuJoCo 4 inside) cannot share the project's venv
(MuJoCo 3); ``scripts/install_franky_sim.sh`` (run by ``scripts/bootstrap.sh`` with the ``dev``
extra) builds ``.venv-franky-sim``. Each server binds ports 1337 (arm) and 1338 (gripper) on one
address and serves one client, so every fixture instance takes a loopback address of its own
(``--hostname 127.0.0.N``, the first whose two ports are free): modules, and pytest-xdist
workers, never share a server.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRANKY_SIM = ROOT / ".venv-franky-sim" / "bin" / "franky-sim"
PORTS = (1337, 1338)
READY = "Connect to the server using"


@dataclass
class FrankySim:
    """A running server: connect pylibfranka (or ``arm.ip``) to ``host``."""

    host: str
    proc: subprocess.Popen
    log: Path

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): to its client the robot went silent."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]


def _ports_free(host: str) -> bool:
    for port in PORTS:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def _raise_priority() -> None:
    """Run the simulated robot ahead of other work where allowed (root, CAP_SYS_NICE): a real arm
    never waits for the PC's load, and libfranka drops the connection after 1 s without a state
    packet, so a starved simulator would read as a lost robot. Unprivileged: normal priority."""
    try:
        os.nice(-10)
    except OSError:
        pass


def _start(host: str, log: Path, timeout_s: float = 90.0) -> subprocess.Popen | None:
    """franky-sim on ``host``, or None when another process took the address first."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(FRANKY_SIM), "-s", "mujoco", "--hostname", host],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=_raise_priority,
        )
    deadline = time.monotonic() + timeout_s  # MuJoCo + Pinocchio import slowly on a busy CPU
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if READY in text:
            return proc
        if proc.poll() is not None:
            if "Could not find available hostname" in text:
                return None
            raise RuntimeError(f"franky-sim exited with {proc.returncode}:\n{text[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"franky-sim not ready after {timeout_s:.0f} s:\n{log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)  # a paused server would ignore SIGTERM until resumed
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def franky_sim() -> Iterator[FrankySim]:
    """One franky-sim server for the module, stopped at its end."""
    if not FRANKY_SIM.exists():
        pytest.skip(
            f"{FRANKY_SIM.relative_to(ROOT)} is absent: run scripts/install_franky_sim.sh "
            "(scripts/bootstrap.sh does with the dev extra)"
        )
    log = Path(tempfile.mkstemp(prefix="franky-sim-", suffix=".log")[1])
    for n in range(1, 255):
        host = f"127.0.0.{n}"
        if not _ports_free(host):
            continue
        proc = _start(host, log)
        if proc is not None:
            break
    else:
        raise RuntimeError("no loopback address 127.0.0.1-254 has ports 1337 and 1338 free")
    try:
        yield FrankySim(host, proc, log)
    finally:
        _stop(proc)
        log.unlink(missing_ok=True)
