"""SIGKILL of the streamer process and of the ingest process during one run: no transition is
lost or stored twice (every seq's step is in the store exactly once, in order)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from stream_driver import EPISODE

from rlinf_data.store import EpisodeStore

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RLINF_INGEST_TOKEN": "secret-token"}
    return subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT
    )


def _kill(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)


def _wait(cond, what: str, tmp_path: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{_logs(tmp_path)}")
        time.sleep(0.05)


def _driver_log(tmp_path: Path) -> str:
    return (tmp_path / "driver.log").read_text(errors="replace")


def test_sigkill_streamer_and_ingest_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    """Each kill waits for what it must interrupt (polled, never a fixed schedule): the streamer
    is killed once the learner acked its items, the learner once it acked the restarted
    streamer's items, and restarts once the streamer noticed and spools."""
    total = 40 * EPISODE  # 440 items; production stays at most 100 items past the learner's ack
    port, store = _free_port(), tmp_path / "store"
    ingest_args = ["-m", "rlinf_data.ingest", "--store", str(store), "--port", str(port)]
    driver_args = [
        str(ROOT / "tests/rlinf_data/stream_driver.py"),
        "--url",
        f"ws://127.0.0.1:{port}/transitions",
        "--spool",
        str(tmp_path / "spool"),
        "--total",
        str(total),
        "--hz",
        "150",
        "--ahead",
        "100",
    ]
    ingest = _start(ingest_args, tmp_path / "ingest.log")
    driver = _start(driver_args, tmp_path / "driver.log")
    procs = [ingest, driver]
    try:
        _wait(lambda: "(past 40)" in _driver_log(tmp_path), "the learner to ack 40 items", tmp_path)
        _kill(driver)  # streamer killed mid-run (items in its spool, some unacknowledged)
        driver = _start(driver_args, tmp_path / "driver.log")
        procs.append(driver)
        _wait(
            lambda: _driver_log(tmp_path).count("learner acked up to seq") >= 3,
            "the learner to ack the restarted streamer's items",
            tmp_path,
        )
        lost = _driver_log(tmp_path).count("spooling (backlog")
        _kill(ingest)  # learner killed mid-run (a batch possibly half-written, unacknowledged)
        _wait(
            lambda: _driver_log(tmp_path).count("spooling (backlog") > lost,
            "the streamer to notice the learner is away",
            tmp_path,
        )
        ingest = _start(ingest_args, tmp_path / "ingest.log")
        procs.append(ingest)
        assert driver.wait(timeout=240) == 0, _logs(tmp_path)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
    logs = _logs(tmp_path)
    assert logs.count("resuming at seq") == 2 and "resuming at seq 0\n" in logs
    resumed = int(logs.split("resuming at seq ")[2].split()[0])
    assert 0 < resumed < total, logs  # the kill really hit the middle of the run
    ids = [int(v) for ep in EpisodeStore(store, mode="r") for v in ep.steps["state"][:, 0]]
    expected = [s for s in range(total) if s % EPISODE != EPISODE - 1]
    assert len(ids) == len(set(ids)), (
        f"duplicated seqs: {sorted({i for i in ids if ids.count(i) > 1})}"
    )
    assert sorted(ids) == expected, f"missing seqs: {sorted(set(expected) - set(ids))[:20]}"
    infos = [
        EpisodeStore(store, mode="r").info(i) for i in range(len(EpisodeStore(store, mode="r")))
    ]
    ended = sorted(i.extra["robot_episode"] for i in infos if i.status == "complete")
    assert ended[-1] == total // EPISODE - 1
    print(
        logs.split("done: ")[-1].splitlines()[0]
    )  # the final streamer status: resent / duplicates


def _logs(tmp_path: Path) -> str:
    return "\n".join(
        f"==== {f.name}\n{f.read_text(errors='replace')[-4000:]}"
        for f in sorted(tmp_path.glob("*.log"))
    )
