"""The top room plugs the policy server's push client into the online learner (imports point
down)."""

from types import SimpleNamespace

import pytest

from learner.offpolicy import remote
from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import Registry


def _cfg(url: str) -> SimpleNamespace:
    return SimpleNamespace(push=SimpleNamespace(url=url, token_file="", timeout_s=1.0))


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
