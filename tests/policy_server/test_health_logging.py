"""Health polls are silent at INFO: a load balancer polling ``/healthz`` every second must not
write two log lines a second; the log says what changed."""

from __future__ import annotations

import logging
import time
import urllib.request

from ps_helpers import running_server

POLLS = 5


def test_healthz_polls_log_nothing_at_info(caplog):
    caplog.set_level(logging.DEBUG)
    with running_server() as srv:
        caplog.clear()  # start-up lines are wanted; only the polls are under test
        for _ in range(POLLS):
            with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/healthz", timeout=10) as r:
                assert r.status == 200
        deadline = (
            time.monotonic() + 30
        )  # the server logs a poll's close after the client has its answer
        while sum("connection closed" in r.getMessage() for r in caplog.records) < POLLS:
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.05)
        loud = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.INFO]
        assert loud == [], loud
