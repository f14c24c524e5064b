"""The top room plugs the policy server's push client into the online learner (imports point
down)."""

from types import SimpleNamespace

import pytest

from learner.offpolicy import remote
from learner.offpolicy.fanout import FanOutPusher
from learner.offpolicy.robot_sections import PushSection
from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import Registry


def _cfg(url: str, *more: str) -> SimpleNamespace:
    return SimpleNamespace(push=PushSection(url=url, urls=list(more), token_file="", timeout_s=1.0))


def test_no_push_url_needs_no_client(monkeypatch) -> None:
    monkeypatch.setattr(remote, "PUSH_CLIENTS", Registry("weight push client"))
    assert remote._pusher(_cfg("")) is None


def test_push_url_without_a_plugged_client_names_the_key(monkeypatch) -> None:
    monkeypatch.setattr(remote, "PUSH_CLIENTS", Registry("weight push client"))
    with pytest.raises(ConfigError, match="push.url"):
        remote._pusher(_cfg("ws://127.0.0.1:1/weights"))


def test_plug_in_registers_the_policy_server_client_once(monkeypatch) -> None:
    from rlinf_cli import wiring

    monkeypatch.setattr(remote, "PUSH_CLIENTS", Registry("weight push client"))
    wiring.plug_in()
    wiring.plug_in()  # idempotent: `rlinf train` may be called twice in one process (tests)
    assert remote.PUSH_CLIENTS.get("websocket") is wiring.websocket_pusher
    made = []
    monkeypatch.setattr(
        remote.PUSH_CLIENTS, "get", lambda name: lambda *a: made.append(a) or "pusher"
    )
    assert remote._pusher(_cfg("ws://h:8000")) == "pusher" and made == [("ws://h:8000", "", 1.0)]


def test_more_push_urls_get_one_client_each_behind_the_fan_out(monkeypatch) -> None:
    made = []
    monkeypatch.setattr(
        remote.PUSH_CLIENTS, "get", lambda name: lambda *a: made.append(a) or f"pusher{len(made)}"
    )
    monkeypatch.setattr(remote.PUSH_CLIENTS, "names", lambda: ["websocket"])
    fan = remote._pusher(_cfg("ws://a:8000", "ws://b:8000", "ws://c:8000"))
    assert isinstance(fan, FanOutPusher) and fan.pushers == ["pusher1", "pusher2", "pusher3"]
    assert [m[0] for m in made] == ["ws://a:8000", "ws://b:8000", "ws://c:8000"]
    made.clear()
    assert remote._pusher(_cfg("", "ws://b:8000")) == "pusher1"  # urls alone: one server


@pytest.mark.parametrize(
    ("urls", "match"),
    [
        (["http://b:8000"], "push.urls"),  # not a websocket URL
        (["ws://a:8000"], "more than once"),  # the same server as push.url
    ],
)
def test_push_urls_refused_with_the_key(monkeypatch, urls, match) -> None:
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN", "t" * 40)
    with pytest.raises(ConfigError, match=match):
        PushSection(url="ws://a:8000", urls=urls).validate()
