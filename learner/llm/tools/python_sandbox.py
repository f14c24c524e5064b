"""``python``: run a snippet in a sandboxed subprocess; its stdout is the observation.

Limits, each enforced by the operating system or the interpreter, not by trust:

- **time**: wall-clock ``timeout_s`` (the process group is killed) and ``RLIMIT_CPU``;
- **memory**: ``RLIMIT_AS`` (address space), so an allocation past it is a ``MemoryError``;
- **files**: the child runs in a fresh temp dir (its cwd, ``HOME`` and ``TMPDIR``), ``RLIMIT_FSIZE``
  caps any file it writes, and a PEP 578 audit hook (:mod:`learner.llm.tools.sandbox_child`)
  refuses ``open`` / listing / renaming outside that dir;
- **network / processes**: the hook refuses every ``socket.*``, ``subprocess.*``, ``os.exec*``,
  ``os.fork``, ``os.system`` and ``ctypes.*`` event; ``-I -S`` ignores environment and
  site-packages.

Not a security boundary against a determined attacker with native code (there is no
``unshare`` / seccomp here); it contains what a policy model writes by mistake or by reward
hacking. The temp dir is removed after every call.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from learner.llm.tools.base import TOOLS, Tool, ToolError

__all__ = ["PythonSandbox", "run_sandboxed"]

CHILD = Path(__file__).with_name("sandbox_child.py")


def _limits(memory_mb: int, cpu_s: int, file_mb: int) -> None:
    """preexec_fn: runs in the child between fork and exec."""
    mem = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_mb << 20, file_mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_sandboxed(
    code: str,
    timeout_s: float = 5.0,
    memory_mb: int = 256,
    file_mb: int = 1,
    max_output: int = 4000,
) -> tuple[int, str, str]:
    """``(returncode, stdout, stderr)`` of ``code``; returncode -9 means killed at the timeout."""
    with tempfile.TemporaryDirectory(prefix="rlinf-sandbox-") as tmp:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": tmp,
            "TMPDIR": tmp,
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
        }
        cpu = max(1, int(timeout_s + 0.999))
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(CHILD)],
            cwd=tmp,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=lambda: _limits(memory_mb, cpu, file_mb),
            close_fds=True,
        )
        try:
            out, err = proc.communicate(code, timeout=timeout_s)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            rc = -9
    return rc, out[:max_output], err[-max_output:]


@TOOLS.register("python")
class PythonSandbox(Tool):
    def __init__(
        self, timeout_s: float = 5.0, memory_mb: int = 256, file_mb: int = 1, max_output: int = 2000
    ) -> None:
        self.timeout_s, self.memory_mb, self.file_mb, self.max_output = (
            timeout_s,
            memory_mb,
            file_mb,
            max_output,
        )

    def __call__(self, args: str) -> str:
        rc, out, err = run_sandboxed(
            args, self.timeout_s, self.memory_mb, self.file_mb, self.max_output
        )
        if rc == -9:
            raise ToolError(f"timed out after {self.timeout_s:g} s (killed)")
        if rc == -signal.SIGXCPU:  # RLIMIT_CPU (= the timeout) fired before the wall clock did
            raise ToolError(f"timed out after {self.timeout_s:g} s (CPU time limit)")
        if rc != 0:
            last = err.strip().splitlines()[-1] if err.strip() else f"exit code {rc}"
            if rc < 0:
                last = f"killed by signal {-rc} ({last})"
            raise ToolError(last)
        return out.strip()
