"""``rlinf online`` end to end over real processes and real DDS on the push twin: with no demos
it collects one (scripted human, successful episodes only), starts the learner, serves its
initial actor, starts the twin graph with the streamer on; once robot steps are in the
learner's episode store a SIGINT (Ctrl-C) stops everything in reverse order: the graph (its
streamer reports its backlog), the server, the learner (its final checkpoint)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mujoco", reason="needs the sim extra")

from online_rig import TINY_ONLINE_LEARNER, online_push

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.timeout(600)]

TINY_LEARNER = (
    "learner:train.time_budget_s=400",  # Ctrl-C ends it, not the budget
    *TINY_ONLINE_LEARNER,
    "server:--torch-threads=1",
)


def running_with(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (our children name the run dir)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmd and int(pid) != os.getpid():
            found.append(cmd)
    return found


def wait_for(cond, timeout: float, what: str, out: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if cond():
            return
        time.sleep(0.5)
    logs = "\n".join(
        f"==== {f.name}\n{f.read_text(errors='replace')[-2000:]}"
        for f in sorted((out.parent / "run" / "logs").glob("*.log"))
    )
    raise AssertionError(
        f"no {what} (exit code {proc.poll()}, or {timeout} s passed)\n{out.read_text()}{logs}"
    )


def test_one_command_runs_the_loop_and_ctrl_c_stops_it(
    tmp_path: Path, ros_domain_id: int, monkeypatch
) -> None:
    proc, run, out = online_push(tmp_path, monkeypatch, *TINY_LEARNER)
    try:
        store = run / "episodes" / "episodes"
        wait_for(
            lambda: store.is_dir() and any(p.name.isdigit() for p in store.iterdir()),
            420,
            "robot steps in the learner's episode store",
            out,
            proc,
        )
        assert proc.poll() is None, out.read_text()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = out.read_text()
    lines = [ln.removeprefix("rlinf online: ") for ln in text.splitlines()]
    assert rc == 0, text
    # one line per stage, in order; the tokens were made here and never shown
    starts = [m.group(1) for ln in lines if (m := re.match(r"\[\d/4\] (\w+) \(", ln))]
    assert starts == ["collect", "learner", "server", "graph"], text
    secrets = tmp_path / "secrets"
    for name in ("ingest_token", "weights_token"):
        assert (secrets / name).read_text().strip() not in text
    # stopped in reverse order, every child with 0, none left running
    assert [ln for ln in lines if "stopped (exit code" in ln] == [
        "graph stopped (exit code 0)",
        "server stopped (exit code 0)",
        "learner stopped (exit code 0)",
    ], text
    assert any(ln.startswith("spool backlog: ") and " step" in ln for ln in lines), text
    assert running_with(str(run)) == []
    # the learner took the robot's steps and wrote its final checkpoint on the signal
    assert "stop requested" in (run / "logs" / "learner.log").read_text()
    final = json.loads((run / "metrics.json").read_text())["final"]
    assert final["ingest/stored"] > 0, final  # steps in the store (acknowledged)
    checkpoint = Path(final["checkpoint"])
    assert checkpoint.is_dir() and checkpoint.parent == run / "checkpoints", final
