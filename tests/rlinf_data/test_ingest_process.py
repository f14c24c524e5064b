"""The ingest in a process of its own: what robots stream reaches the learner's feed exactly once
and in order, the status crosses over, the feed stays bounded, and a dead child or a dead learner
is noticed rather than waited on."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_fleet import TOKEN, _fleet, _until  # one fleet and one wait for both ingest modes

from rlinf_contracts.episode import StepLayout
from rlinf_data.ingest import IngestConfig
from rlinf_data.ingest_process import IngestProcess
from rlinf_data.store import EpisodeStore
from rlinf_ros.fleet import count_items, synthetic_store

LAYOUT = StepLayout(4, 2)


def test_every_stored_step_reaches_the_learner_once_in_order(tmp_path: Path) -> None:
    src = synthetic_store(tmp_path / "recorded", episodes=3, length=12, layout=LAYOUT)
    cfg = IngestConfig(store=str(tmp_path / "learner"), port=0, token=TOKEN)
    ingest = IngestProcess(cfg, layout=LAYOUT).start()
    assert ingest.pid != os.getpid() and ingest.url.endswith(f":{ingest.port}/transitions")
    fleet = _fleet(tmp_path, src, ingest.url, "arm", robots=3, hz=0.0)
    _, steps = count_items(fleet.episodes)
    got: list = []
    try:
        fleet.start()
        assert fleet.wait_acked(60.0), fleet.status()

        def drained() -> bool:
            while ingest.feed.qsize():
                got.append(ingest.feed.get(timeout=1.0))
            return len(got) >= 3 * steps

        _until(drained, "every stored step on the learner's feed")
        _until(lambda: ingest.status()["ledger"]["stored"] == 3 * steps, "the child's status")
        status = ingest.status()
    finally:
        fleet.stop()
        ingest.stop()
    assert len(got) == 3 * steps and ingest.feed.qsize() == 0
    for robot in ("arm0", "arm1", "arm2"):
        seqs = [t.seq for t in got if t.robot_id == robot]
        assert len(seqs) == steps and seqs == sorted(seqs), robot  # once each, in order
    assert sorted(status["per_robot"]) == ["arm0", "arm1", "arm2"]
    assert status["refused"] == {} and status["dropped_feed"] == 0 and status["cpu_s"] > 0
    store = EpisodeStore(tmp_path / "learner", mode="r")
    assert sum(store.length(i) for i in range(len(store))) == 3 * steps  # stored, then fed


def test_a_learner_that_reads_nothing_keeps_the_feed_bounded(tmp_path: Path) -> None:
    src = synthetic_store(tmp_path / "recorded", episodes=3, length=12, layout=LAYOUT)
    cfg = IngestConfig(store=str(tmp_path / "learner"), port=0, token=TOKEN, feed_size=8)
    with IngestProcess(cfg, layout=LAYOUT) as ingest:
        fleet = _fleet(tmp_path, src, ingest.url, "arm", robots=1, hz=0.0).start()
        try:
            assert fleet.wait_acked(60.0), fleet.status()  # the robot is never held back
            _until(lambda: ingest.status()["ledger"]["stored"] == 36, "every step stored")
            _until(lambda: ingest.dropped_feed == 36 - 2 * 8, "the oldest dropped")
            assert ingest.feed.qsize() == 8  # in flight to the learner: at most feed_size
            first = ingest.feed.get(timeout=5.0)
            assert first.seq == 0  # what crossed first is the oldest of what was kept
        finally:
            fleet.stop()
    assert sum(1 for _ in EpisodeStore(tmp_path / "learner", mode="r")) >= 3  # the store has all


def test_a_robot_of_another_layout_is_refused_across_the_process(tmp_path: Path) -> None:
    odd = synthetic_store(tmp_path / "odd", episodes=1, length=5, layout=StepLayout(6, 2))
    cfg = IngestConfig(store=str(tmp_path / "learner"), port=0, token=TOKEN)
    with IngestProcess(cfg, layout=LAYOUT) as ingest:
        bad = _fleet(tmp_path, odd, ingest.url, "odd", robots=1, hz=0.0).start()
        try:
            _until(lambda: "odd0" in ingest.status()["refused"], "the odd robot refused")
        finally:
            bad.stop()
        assert ingest.status()["refused"] == {
            "odd0": "robot odd0 refused: its state has shape (6,), the learner's layout wants (4,);"
            " robots of different specs share one learner through a shared spec (`rlinf spec"
            " --shared ROBOT_A ROBOT_B ...` prints the spec each robot runs)"
        }


def test_a_taken_port_fails_start_and_a_dead_child_fails_the_wait(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        cfg = IngestConfig(store=str(tmp_path / "a"), port=taken, token=TOKEN)
        with pytest.raises(OSError, match="address already in use"):
            IngestProcess(cfg).start()
    ingest = IngestProcess(IngestConfig(store=str(tmp_path / "b"), port=0, token=TOKEN)).start()
    try:
        assert ingest.pid is not None
        os.kill(ingest.pid, signal.SIGKILL)
        with pytest.raises(RuntimeError, match="ingest process exited with code -9"):
            _until(lambda: ingest.feed.get(timeout=0.2) is None, "an error", 30.0)
    finally:
        ingest.stop()


LEARNER = """
import sys, time
from rlinf_data.ingest import IngestConfig
from rlinf_data.ingest_process import IngestProcess
ingest = IngestProcess(IngestConfig(store=sys.argv[1], port=0, token="t")).start()
print(ingest.pid, ingest.port, flush=True)
time.sleep(600)
"""


def test_a_killed_learner_takes_its_ingest_process_with_it(tmp_path: Path) -> None:
    learner = subprocess.Popen(
        [sys.executable, "-c", LEARNER, str(tmp_path / "store")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert learner.stdout is not None
        child, port = (int(v) for v in learner.stdout.readline().split())
        learner.kill()
        learner.wait(10)

        def gone() -> bool:
            try:
                return Path(f"/proc/{child}/status").read_text().find("State:\tZ") >= 0
            except FileNotFoundError:
                return True

        _until(gone, "the ingest process to end", 30.0)
        with socket.socket() as s:  # a restarted learner can listen on the same port again
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
    finally:
        learner.kill()
