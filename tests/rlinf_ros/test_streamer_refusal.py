"""A streamer whose token the ingest refuses (HTTP 401) says so once, with the keys to match.

A wrong token is no lost connection: no retry cures it until someone changes a token, so the
robot PC logs one error naming where its token came from and the learner's keys, reports it in
its status and retries slowly without repeating itself; once the tokens agree
(the learner restarted with the robot's token) the steps flow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlinf_data.ingest import IngestConfig, IngestServer
from rlinf_ros.streaming import StreamerConfig, TransitionStreamer

ROBOT_TOKEN, LEARNER_TOKEN = "robot-token-" + "r" * 32, "learner-token-" + "l" * 32


def _wait(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_refused_token_is_reported_once_with_the_fix_until_the_tokens_agree(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rlinf_ros.streaming")
    store = str(tmp_path / "store")
    srv = IngestServer(IngestConfig(store=store, port=0, token=LEARNER_TOKEN)).start()
    cfg = StreamerConfig(
        url=srv.url,
        token=ROBOT_TOKEN,
        spool_dir=str(tmp_path / "spool"),
        backoff_s=0.05,
        backoff_max_s=0.1,
    )
    streamer = TransitionStreamer(cfg, token_hint="streamer.token_file /run/secrets/ingest")
    streamer.start()
    try:
        _wait(lambda: streamer.stats["failures"] >= 3, "three refused connects")
        refused = streamer.status()["refused"]
        assert "HTTP 401" in refused and "streamer.token_file /run/secrets/ingest" in refused
        assert "'ingest.token_file'" in refused and "RLINF_INGEST_TOKEN" in refused
        errors = [
            r.getMessage()
            for r in caplog.records
            if r.name == "rlinf_ros.streaming" and r.levelno >= logging.WARNING
        ]
        assert len(errors) == 1 and "refused this robot's token" in errors[0], errors
        assert not any("cannot reach" in m for m in errors)

        port = srv.port  # the learner restarted with the robot's token: the streamer goes on
        srv.stop()
        srv = IngestServer(IngestConfig(store=store, port=port, token=ROBOT_TOKEN)).start()
        _wait(lambda: streamer.connected, "a connection once the tokens agree")
        assert streamer.status()["refused"] == ""
    finally:
        streamer.stop()
        srv.stop()
