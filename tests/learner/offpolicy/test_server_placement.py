"""The optional ``server`` placement component of an off-policy run: refused with the reason
where it cannot apply, a misspelt component named with the nearest one, and what a valid one
changes (Ray instead of the in-process learner, the placed servers' plug-in). No Ray here."""

from __future__ import annotations

from pathlib import Path

import pytest

from learner.offpolicy.config import COMPONENTS, OPTIONAL, OffPolicyConfig
from learner.offpolicy.servers import POLICY_SERVERS, PlacedServers, check_offered, start_servers
from learner.offpolicy.topology import runs_in_process
from learner.placement import PlacementError, parse_placement
from rlinf_contracts.config import ConfigError, from_dict

FLEET = {"learner,replay": "0@learner_node", "env": "0@learner_node", "server": "1-2@fleet:site"}
SECRET = "a-weights-token-long-enough-0123456789"


def _cfg(tmp_path: Path, placement: dict, ingest: bool = True, **more) -> OffPolicyConfig:
    token = tmp_path / "token"
    token.write_text(SECRET)
    raw: dict = {"placement": placement, "train": {"out_dir": str(tmp_path / "run")}}
    if ingest:
        raw["ingest"] = {"enabled": True, "token_file": str(token)}
        raw["push"] = {"token_file": str(token)}
    return from_dict(OffPolicyConfig, {**raw, **more})


def test_server_without_robots_streaming_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'server'.*ingest\.enabled: true"):
        _cfg(tmp_path, {"env,learner,replay": 0, "server": 1}, ingest=False)


@pytest.mark.parametrize(
    ("name", "near"), [("sever", "server"), ("servers", "server"), ("lerner", "learner")]
)
def test_a_misspelt_component_gets_the_nearest_name(tmp_path: Path, name: str, near: str) -> None:
    placement = {"env,replay": 0, "learner": 0, name: 1}
    if name == "lerner":
        placement = {"env,replay": 0, "lerner": 0}
    with pytest.raises(ConfigError, match=f"unknown component '{name}'; did you mean '{near}'"):
        _cfg(tmp_path, placement)


def test_the_grammar_knows_optional_components_and_does_not_require_them() -> None:
    known = list(COMPONENTS)
    assert "server" not in parse_placement({"env,learner,replay": 0}, 2, known, OPTIONAL)
    with pytest.raises(PlacementError, match="Did you mean 'server'"):
        parse_placement({"env,learner,replay": 0, "sever": 1}, 2, known, OPTIONAL)
    with pytest.raises(PlacementError, match="unknown component 'server'"):
        parse_placement({"env,learner,replay": 0, "server": 1}, 2, known)  # not optional here


def test_servers_need_as_many_units_of_their_label_as_the_nodes_offer() -> None:
    placed = parse_placement(FLEET, 3, list(COMPONENTS), OPTIONAL)["server"]
    check_offered(placed, {"fleet:site": 2.0, "learner_node": 1.0})  # one per site node
    with pytest.raises(ConfigError, match=r"2 server\(s\) need one unit each of 'fleet:site'"):
        check_offered(placed, {"fleet:site": 1.0})


def test_each_required_component_once_and_server_at_most_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must place exactly"):
        _cfg(tmp_path, {"learner,replay": 0, "server": 1})
    with pytest.raises(ConfigError, match="at most once"):
        _cfg(tmp_path, {"env,learner,replay": 0, "server": 1, " server": 2})


def test_placed_servers_need_the_weights_token(tmp_path: Path, monkeypatch) -> None:
    for var in ("RLINF_WEIGHTS_TOKEN", "RLINF_WEIGHTS_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    token = tmp_path / "ingest.token"
    token.write_text(SECRET)
    raw = {
        "placement": FLEET,
        "ingest": {"enabled": True, "token_file": str(token)},
        "train": {"out_dir": str(tmp_path / "run")},
    }
    with pytest.raises(ConfigError, match="push.token_file"):
        from_dict(OffPolicyConfig, raw)


def test_a_fleet_placement_runs_on_ray_and_may_join_a_cluster(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, FLEET)
    assert cfg.places_servers and not runs_in_process(cfg, 3)
    placed = parse_placement(cfg.placement, 3, list(COMPONENTS), OPTIONAL)["server"]
    assert placed.process_slots == [[1], [2]] and placed.resources == {"fleet:site": 1.0}
    joined = _cfg(tmp_path, FLEET, cluster={"address": "10.0.0.1:6379"})
    assert joined.cluster.address  # the learner runs where the placement puts it
    # without placed servers the ingesting learner stays in the calling process
    with pytest.raises(ConfigError, match=r"cluster.address.*placement 'server'"):
        _cfg(tmp_path, {"env,learner,replay": 0}, cluster={"address": "10.0.0.1:6379"})
    assert runs_in_process(_cfg(tmp_path, {"env,learner,replay": 0}), 3)


def test_servers_section_names_its_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="servers.port"):
        _cfg(tmp_path, FLEET, servers={"port": 70000})
    cfg = _cfg(tmp_path, FLEET)
    assert (cfg.servers.host, cfg.servers.port, cfg.servers.deterministic) == ("", 0, False)


def test_no_server_placement_starts_nothing_and_one_without_ray_says_how(
    tmp_path: Path, monkeypatch
) -> None:
    import ray

    empty = start_servers(_cfg(tmp_path, {"env,learner,replay": 0}), tmp_path / "initial")
    assert isinstance(empty, PlacedServers) and empty.urls == [] and empty.rows == []
    empty.stop()  # nothing to stop
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(ConfigError, match="rlinf train"):
        start_servers(_cfg(tmp_path, FLEET), tmp_path / "initial")


def test_plug_in_registers_the_placed_policy_server() -> None:
    from rlinf_cli import wiring

    wiring.plug_in()
    wiring.plug_in()  # idempotent
    assert POLICY_SERVERS.get("websocket") is wiring.placed_policy_server
