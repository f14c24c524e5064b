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
from stream_driver import EPISODE  # noqa: E402

from rlinf_data.store import EpisodeStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RLINF_INGEST_TOKEN": "secret-token"}
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=open(log, "ab"),
                            stderr=subprocess.STDOUT)


def _kill(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)


def test_sigkill_streamer_and_ingest_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    total = 40 * EPISODE  # 440 items, ~2.2 s of production at 200 Hz, plus the outages
    port, store = _free_port(), tmp_path / "store"
    ingest_args = ["-m", "rlinf_data.ingest", "--store", str(store), "--port", str(port)]
    driver_args = [str(ROOT / "tests/rlinf_data/stream_driver.py"), "--url", f"ws://127.0.0.1:{port}/transitions",
                   "--spool", str(tmp_path / "spool"), "--total", str(total), "--hz", "150"]
    ingest = _start(ingest_args, tmp_path / "ingest.log")
    driver = _start(driver_args, tmp_path / "driver.log")
    procs = [ingest, driver]
    try:
        time.sleep(2.0)
        _kill(driver)  # streamer killed mid-run (items in its spool, some unacknowledged)
        driver = _start(driver_args, tmp_path / "driver.log")
        procs.append(driver)
        time.sleep(1.0)
        _kill(ingest)  # learner killed mid-run (a batch possibly half-written, unacknowledged)
        time.sleep(0.7)  # the streamer spools while the learner is away
        ingest = _start(ingest_args, tmp_path / "ingest.log")
        procs.append(ingest)
        assert driver.wait(timeout=120) == 0, _logs(tmp_path)
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
    assert len(ids) == len(set(ids)), f"duplicated seqs: {sorted({i for i in ids if ids.count(i) > 1})}"
    assert sorted(ids) == expected, f"missing seqs: {sorted(set(expected) - set(ids))[:20]}"
    infos = [EpisodeStore(store, mode="r").info(i) for i in range(len(EpisodeStore(store, mode="r")))]
    ended = sorted(i.extra["robot_episode"] for i in infos if i.status == "complete")
    assert ended[-1] == total // EPISODE - 1
    print(logs.split("done: ")[-1].splitlines()[0])  # the final streamer status: resent / duplicates


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"==== {f.name}\n{f.read_text(errors='replace')[-4000:]}" for f in sorted(tmp_path.glob("*.log")))
