"""Weights fan out to every robot site's policy server: the learner's push client for
``push.url`` + ``push.urls`` against real servers, one of them unreachable."""

from __future__ import annotations

import logging
import socket
import time
from types import SimpleNamespace

import numpy as np
from ps_helpers import TOKEN, LinearPolicy, expected_actions, running_server, version_weights

from learner.offpolicy import remote
from learner.offpolicy.fanout import FanOutPusher
from learner.offpolicy.robot_sections import PushSection
from policy_server.client import PolicyClient
from rlinf_cli import wiring


def _dead_url() -> str:
    """A loopback port nothing listens on (a site whose server is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"ws://127.0.0.1:{s.getsockname()[1]}"


def _served_version(url: str) -> tuple[int, np.ndarray]:
    state = np.arange(4, dtype=np.float32)
    with PolicyClient(url, timeout_s=30) as client:
        out = client.infer({"state": state})
    return int(out["weight_version"]), np.asarray(out["actions"])


def test_every_site_serves_the_pushed_weights_and_a_dead_site_delays_no_other(
    monkeypatch,
) -> None:
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN", TOKEN)
    wiring.plug_in()
    policy = LinearPolicy()
    with (
        running_server(LinearPolicy(), weights_token=TOKEN) as a,
        running_server(LinearPolicy(), weights_token=TOKEN) as b,
    ):
        dead = _dead_url()
        push = PushSection(url=a.url, urls=[b.url, dead], token_file=None, timeout_s=5.0)
        fan = remote._pusher(SimpleNamespace(push=push))
        assert isinstance(fan, FanOutPusher) and len(fan.pushers) == 3
        try:
            for v in (1, 2):
                fan.offer(version_weights(policy, v))
                live = fan.pushers[:2]
                deadline = time.monotonic() + 60  # polled: a loaded machine is slow, never wrong
                while time.monotonic() < deadline and not all(p.version == v for p in live):
                    time.sleep(0.05)
                for site in (a, b):
                    version, actions = _served_version(site.url)
                    assert version == v
                    np.testing.assert_allclose(
                        actions, expected_actions(np.arange(4, dtype=np.float32), v), rtol=1e-5
                    )
            # the dead site never acknowledged: the fan-out reports the oldest version (none)
            # and its failures, and a flush says not every site serves the newest weights
            assert fan.version == -1
            assert fan.stats["failures"] >= 1 and fan.stats["sites"] == 3
            assert fan.stats["pushes"] >= 4  # two versions to each live site
            assert not fan.flush(0.5)
        finally:
            fan.stop()


def test_a_background_pusher_logs_its_first_push_then_one_line_a_minute(caplog) -> None:
    from policy_server.push import BackgroundPusher

    policy = LinearPolicy()
    caplog.set_level(logging.INFO, logger="policy_server.push")
    with running_server(LinearPolicy(), weights_token=TOKEN) as srv:
        pusher = BackgroundPusher(srv.url, TOKEN).start()
        try:
            for v in range(1, 6):
                pusher.offer(version_weights(policy, v))
                assert pusher.flush(60)
        finally:
            pusher.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "policy_server.push"]
    assert pusher.stats["pushes"] == 5
    assert len(lines) == 1 and "version 1 serving" in lines[0], lines
