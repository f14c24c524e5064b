"""Learner ingest at its edges: a silent connection (hello timeout), a robot's second connection
replacing its first, a gap in a robot's seqs, and the health check."""

from __future__ import annotations

import logging
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stream_driver import item

from rlinf_contracts.transitions import (
    IngestHello,
    IngestWelcome,
    TransitionAck,
    batch_frame,
    encode,
)
from rlinf_contracts.wire import packb, unpackb
from rlinf_data.ingest import IngestConfig, IngestServer, Ledger
from rlinf_data.store import EpisodeStore

TOKEN = "t0k3n"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _server(tmp_path: Path, **kw) -> IngestServer:
    return IngestServer(IngestConfig(store=str(tmp_path / "s"), port=0, token=TOKEN, **kw))


def test_a_connection_that_never_says_hello_is_closed(tmp_path: Path) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    with (
        _server(tmp_path, hello_timeout_s=0.5) as srv,
        connect(srv.url, additional_headers=AUTH) as ws,
    ):
        with pytest.raises(ConnectionClosed) as e:
            ws.recv(timeout=60)
        assert e.value.rcvd.code == 1008 and "expected an ingest hello first" in e.value.rcvd.reason


def test_a_second_connection_of_a_robot_supersedes_the_first(tmp_path: Path) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    with _server(tmp_path) as srv:
        with (
            connect(srv.url, additional_headers=AUTH) as old,
            connect(srv.url, additional_headers=AUTH) as new,
        ):
            old.send(encode(IngestHello("arm0")))
            assert IngestWelcome.from_wire(unpackb(old.recv(timeout=30))).last_seq == -1
            old.send(batch_frame("arm0", [packb(item(0).to_wire())]))
            assert TransitionAck.from_wire(unpackb(old.recv(timeout=30))).acked == 0
            new.send(encode(IngestHello("arm0")))  # the robot reconnected; the old socket lingers
            assert IngestWelcome.from_wire(unpackb(new.recv(timeout=30))).last_seq == 0
            with pytest.raises(ConnectionClosed) as e:
                old.recv(timeout=30)
            assert e.value.rcvd.code == 1001 and "superseded" in e.value.rcvd.reason
            new.send(batch_frame("arm0", [packb(item(s).to_wire()) for s in (0, 1)]))
            ack = TransitionAck.from_wire(unpackb(new.recv(timeout=30)))
            assert (ack.acked, ack.duplicates) == (1, 1)
    assert [
        int(v) for ep in EpisodeStore(tmp_path / "s", mode="r") for v in ep.steps["state"][:, 0]
    ] == [0, 1]


def test_a_gap_in_a_robots_seqs_is_counted_and_logged(tmp_path: Path, caplog) -> None:
    ledger = Ledger(EpisodeStore(tmp_path / "s"))
    caplog.set_level(logging.WARNING)
    ack = ledger.apply("arm0", [item(s) for s in (0, 1, 2, 5, 6, 9)])
    assert ack.acked == 9 and ledger.stats["gaps"] == 2 and ledger.stats["stored"] == 6
    assert "robot arm0 skipped seqs 3..4" in caplog.text and "skipped seqs 7..8" in caplog.text
    ledger.apply("arm0", [item(3)])  # a seq below the ack after a gap: already covered, not stored
    assert ledger.stats["duplicates"] == 1 and ledger.stats["gaps"] == 2


def test_healthz_answers_without_a_token_and_logs_nothing_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with _server(tmp_path) as srv:
        caplog.clear()  # start-up lines are wanted; only the polls are under test
        url = f"http://{srv.cfg.host}:{srv.port}/healthz"
        for _ in range(3):
            with urllib.request.urlopen(url, timeout=30) as r:
                assert (r.status, r.read()) == (200, b"ok\n")
        deadline = (
            time.monotonic() + 30
        )  # the server logs a poll's close after the client has its answer
        while sum("connection closed" in r.getMessage() for r in caplog.records) < 3:
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.05)
    loud = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.INFO and r.name.startswith("websockets")
    ]
    assert loud == [], loud
