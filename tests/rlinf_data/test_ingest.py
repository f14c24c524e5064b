"""Learner ingest: auth, store-before-ack, de-duplication by (robot, seq), the consumer feed,
restart from the store; the streamer against it in one process (a learner restart mid-run)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stream_driver import EPISODE, item

from rlinf_data.ingest import IngestConfig, IngestServer, Ledger
from rlinf_data.store import EpisodeStore

TOKEN = "t0k3n"


def _stored_ids(path: Path) -> list[int]:
    store = EpisodeStore(path, mode="r")
    return [int(v) for ep in store for v in ep.steps["state"][:, 0]]


def _expected(total: int) -> list[int]:
    return [s for s in range(total) if s % EPISODE != EPISODE - 1]


def test_ledger_stores_once_and_pairs_next_observations(tmp_path: Path) -> None:
    got = []
    ledger = Ledger(EpisodeStore(tmp_path / "s"), got.append)
    items = [item(s) for s in range(2 * EPISODE)]
    ack = ledger.apply("arm0", items[:15])
    assert (ack.acked, ack.duplicates) == (14, 0)
    ack = ledger.apply("arm0", items[10:])  # 10..14 again (a resend after a reconnect)
    assert (ack.acked, ack.duplicates) == (2 * EPISODE - 1, 5)
    assert _stored_ids(tmp_path / "s") == _expected(2 * EPISODE)
    store = EpisodeStore(tmp_path / "s", mode="r")
    assert [store.info(i).status for i in range(2)] == ["complete", "complete"]
    assert store.info(0).extra == {"robot_id": "arm0", "robot_episode": 0, "seq0": 0, "seq_end": 10}
    assert store.info(0).success and not store.info(1).success
    # every step reaches the consumer once, with the next step's (or the final) observation
    assert [t.seq for t in got] == _expected(2 * EPISODE)
    assert all(t.next_obs["state"][0] == t.obs["state"][0] + 1 for t in got)
    assert got[9].truncated and got[9].reward == 1.0 and not got[8].truncated


def test_restart_continues_from_the_store(tmp_path: Path) -> None:
    ledger = Ledger(EpisodeStore(tmp_path / "s"))
    ledger.apply("arm0", [item(s) for s in range(5)])  # killed here: episode 0 still open
    del ledger
    again = Ledger(EpisodeStore(tmp_path / "s"))  # reopen marks it aborted, at its 5 steps
    assert again.last_seq("arm0") == 4 and again.last_seq("other") == -1
    ack = again.apply("arm0", [item(s) for s in range(3, 2 * EPISODE)])
    assert (ack.acked, ack.duplicates) == (2 * EPISODE - 1, 2)
    assert _stored_ids(tmp_path / "s") == _expected(2 * EPISODE)
    store = EpisodeStore(tmp_path / "s", mode="r")
    assert [store.info(i).status for i in range(3)] == ["aborted", "complete", "complete"]
    assert store.info(1).extra["continues"] and store.info(1).extra["seq0"] == 5


def test_auth_and_paths(tmp_path: Path) -> None:
    import websockets
    from websockets.sync.client import connect

    with IngestServer(IngestConfig(store=str(tmp_path / "s"), port=0, token=TOKEN)) as srv:
        for headers, status in (({}, 401), ({"Authorization": "Bearer nope"}, 401)):
            with pytest.raises(websockets.InvalidStatus) as e:
                connect(srv.url, additional_headers=headers, open_timeout=5)
            assert e.value.response.status_code == status
        with pytest.raises(websockets.InvalidStatus) as e:
            connect(
                srv.url.replace("/transitions", "/x"),
                additional_headers={"Authorization": f"Bearer {TOKEN}"},
            )
        assert e.value.response.status_code == 404
    with pytest.raises(ValueError, match="ingest.token"):
        IngestConfig(store=str(tmp_path / "s")).resolve()


def test_streamer_survives_a_learner_restart(tmp_path: Path, monkeypatch) -> None:
    from rlinf_ros.streaming import StreamerConfig, TransitionStreamer

    monkeypatch.setenv("RLINF_INGEST_TOKEN", TOKEN)
    total = 6 * EPISODE
    srv = IngestServer(IngestConfig(store=str(tmp_path / "s"), port=0)).start()
    port = srv.port
    s = TransitionStreamer(
        StreamerConfig(
            url=srv.url,
            spool_dir=str(tmp_path / "spool"),
            window=8,
            batch=4,
            backoff_s=0.1,
            backoff_max_s=0.3,
        )
    ).start()
    for seq in range(total // 2):
        assert s.put(item(seq))
    _wait(lambda: s.acked == total // 2 - 1, "first half acked", s)
    srv.stop()
    for seq in range(total // 2, total):  # the learner is away: all of it goes to the spool
        assert s.put(item(seq))
    time.sleep(0.5)
    assert s.backlog == total - total // 2 and not s.connected
    srv = IngestServer(IngestConfig(store=str(tmp_path / "s"), port=port)).start()
    try:
        _wait(lambda: s.acked == total - 1, "all acked after the restart", s)
        assert s.spool.pending_count() <= total  # acknowledged segments are deleted
    finally:
        s.stop()
        srv.stop()
    assert _stored_ids(tmp_path / "s") == _expected(total)


def _wait(cond, what: str, s, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {s.status()}")


def test_bad_frames_are_answered_not_fatal(tmp_path: Path) -> None:
    from websockets.sync.client import connect

    from rlinf_contracts.transitions import (
        IngestHello,
        IngestWelcome,
        TransitionAck,
        batch_frame,
        encode,
    )
    from rlinf_contracts.wire import packb, unpackb

    with IngestServer(IngestConfig(store=str(tmp_path / "s"), port=0, token=TOKEN)) as srv:
        with connect(srv.url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            ws.send(encode(IngestHello("arm1")))
            assert IngestWelcome.from_wire(unpackb(ws.recv(timeout=5))).last_seq == -1
            ws.send(packb({"type": "batch", "robot_id": "arm1", "items": [{"seq": "x"}]}))
            assert "field 'seq'" in ws.recv(timeout=5)
            ws.send(batch_frame("arm1", [packb(item(0).to_wire())]))
            assert TransitionAck.from_wire(unpackb(ws.recv(timeout=5))).acked == 0
    assert np.array_equal(_stored_ids(tmp_path / "s"), [0])
