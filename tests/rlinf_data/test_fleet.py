"""A fleet of replaying robots into one real ingest: exact per-robot delivery across a learner
restart, the fair drain against a flooding robot, per-robot replay shares, a robot of another
layout refused with the reason, and robots of different specs fed through a shared spec."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from learner.offpolicy.remote import Segments
from rlinf_contracts.episode import StepLayout
from rlinf_contracts.spec import ActionSpace, CameraSpec, RobotSpec, StateField
from rlinf_contracts.spec_shared import restrict, shared_spec
from rlinf_data.ingest import IngestConfig, IngestServer
from rlinf_data.replay import ReplayBuffer, ReplayConfig
from rlinf_data.store import EpisodeStore
from rlinf_ros.fleet import Fleet, FleetConfig, count_items, synthetic_store
from rlinf_ros.streaming import StreamerConfig

TOKEN = "fl33t"
LAYOUT = StepLayout(4, 2)
TURN = 16  # the fair drain's turn (IngestConfig.turn_items)


def _stream(**kw) -> StreamerConfig:
    base = {"window": 16, "batch": 4, "backoff_s": 0.05, "backoff_max_s": 0.3}
    return StreamerConfig(url="ws://unset", **{**base, **kw})


def _fleet(tmp: Path, src: Path, url: str, prefix: str, **kw) -> Fleet:
    stream = kw.pop("stream", None) or _stream()
    stream.url = url
    cfg = FleetConfig(prefix=prefix, spool_root=str(tmp / "spool"), stream=stream, **kw)
    return Fleet.from_store(cfg, src, token=TOKEN)


def _until(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _stored_states(path: Path) -> dict[str, list[float]]:
    """Robot id -> ``state[0]`` of its stored steps in seq order."""
    store = EpisodeStore(path, mode="r")
    runs: dict[str, list[tuple[int, list[float]]]] = {}
    for i in range(len(store)):
        info = store.info(i)
        robot = info.extra["robot_id"]
        rows = [float(v) for v in store.read(i).steps["state"][:, 0]]
        runs.setdefault(robot, []).append((int(info.extra["seq0"]), rows))
    return {r: [v for _, rows in sorted(eps) for v in rows] for r, eps in runs.items()}


def test_four_robots_lose_and_duplicate_nothing_across_a_learner_restart(tmp_path: Path) -> None:
    src = synthetic_store(tmp_path / "recorded", episodes=3, length=12, layout=LAYOUT)
    cfg = IngestConfig(store=str(tmp_path / "learner"), port=0, token=TOKEN)
    srv = IngestServer(cfg, layout=LAYOUT).start()
    fleet = _fleet(tmp_path, src, srv.url, "arm", robots=4, hz=200.0)
    items, steps = count_items(fleet.episodes)
    fleet.start()
    try:
        _until(lambda: all(r.streamer.acked >= 8 for r in fleet.robots), "every robot acked 8")
        srv.stop()  # the learner goes away mid-stream; the robots spool, reconnect, resend
        srv = IngestServer(replace(cfg, port=srv.port), layout=LAYOUT)
        srv.start()
        assert fleet.wait_acked(60.0), fleet.status()
    finally:
        fleet.stop()
        srv.stop()
    stored = _stored_states(tmp_path / "learner")
    assert sorted(stored) == [f"arm{i}" for i in range(4)]
    for i in range(4):  # robot i replays the recording from its episode i (mod 3)
        order = [(i + k) % 3 for k in range(3)]
        want = [float(1000 * e + j) for e in order for j in range(12)]
        assert stored[f"arm{i}"] == want, f"arm{i}: lost or duplicated steps"
        assert fleet.robots[i].streamer.acked == items - 1
    assert steps == 36 and items == 39


def test_a_flooding_robot_cannot_starve_the_others(tmp_path: Path) -> None:
    """Every robot connects, then puts all its data at once; the store writer is held until each
    has a batch waiting, then the order of stored steps is recorded. Without the fair drain the
    flooder's 256-item batches would be stored whole, one per turn, and it would be done before
    the small robots (4 batches of 16 each); with turns of 16 it has stored less than half then."""
    src = synthetic_store(tmp_path / "recorded", episodes=3, length=20, layout=LAYOUT)
    gate, order = threading.Event(), []

    def on_transition(t) -> None:  # runs on the store-writer thread: holding it holds writes
        gate.wait(60.0)
        order.append(t.robot_id)

    cfg = IngestConfig(store=str(tmp_path / "learner"), port=0, token=TOKEN, turn_items=TURN)
    srv = IngestServer(cfg, on_transition, layout=LAYOUT).start()
    small = _fleet(
        tmp_path, src, srv.url, "arm", robots=3, hz=0.0, stream=_stream(window=64, batch=16)
    )
    flood = _fleet(
        tmp_path,
        src,
        srv.url,
        "flood",
        robots=1,
        hz=0.0,
        items=525,
        stream=_stream(window=1024, batch=256),
    )
    try:
        for fleet in (small, flood):  # all connected first: a hello needs the held writer too
            assert fleet.connect(30.0), fleet.status()
        small.start()
        flood.start()
        names = ["arm0", "arm1", "arm2", "flood0"]
        _until(lambda: all(srv.queued.get(n, 0) > 0 for n in names), "a batch of every robot")
        gate.set()
        assert small.wait_acked(60.0) and flood.wait_acked(60.0), small.status() + flood.status()
        feed = [srv.feed.get_nowait() for _ in range(srv.feed.qsize())]
    finally:
        gate.set()
        small.stop()
        flood.stop()
        srv.stop()
    small_steps = 60  # 3 episodes of 20 steps each
    assert Counter(order) == {"arm0": 60, "arm1": 60, "arm2": 60, "flood0": 500}
    done = max(i for i, r in enumerate(order) if r != "flood0")  # the small robots' last step
    assert order[:done].count("flood0") < 250, "the flooding robot crowded out the others"
    assert [order[: done + 1].count(f"arm{i}") for i in range(3)] == [small_steps] * 3

    # the learner side: pooled replay follows the data (the flooder dominates), per-robot
    # replay gives each robot the same share of the draws
    shares = {}
    for per_robot in (False, True):
        buf = ReplayBuffer(
            LAYOUT, ReplayConfig(capacity=4096, mix={"online": 1.0}, per_robot=per_robot)
        )
        seg = Segments(LAYOUT, "fleet/replay", None, 20.0)
        for t in feed:
            for ep in seg.add(t):
                buf.add_episode(ep, "online")
        ring = buf.rings["online"]
        rows = ring.draw(40_000, np.random.default_rng(0), per_robot)
        robot_of = {g: r for r, g in buf.groups.items()}
        counts = Counter(robot_of[int(g)] for g in ring.group[rows])
        shares[per_robot] = {r: c / len(rows) for r, c in counts.items()}
    assert shares[False]["flood0"] == pytest.approx(500 / 680, abs=0.02)
    assert all(s == pytest.approx(0.25, abs=0.02) for s in shares[True].values())
    assert len(shares[True]) == 4


def test_a_robot_of_another_layout_is_refused_with_the_reason(tmp_path: Path) -> None:
    good = synthetic_store(tmp_path / "good", episodes=2, length=10, layout=LAYOUT)
    odd = synthetic_store(tmp_path / "odd", episodes=2, length=10, layout=StepLayout(6, 2))
    cfg = IngestConfig(store=str(tmp_path / "learner"), port=0, token=TOKEN)
    with IngestServer(cfg, layout=LAYOUT) as srv:
        ok = _fleet(tmp_path, good, srv.url, "arm", robots=1, hz=0.0).start()
        bad = _fleet(tmp_path, odd, srv.url, "odd", robots=1, hz=0.0).start()
        try:
            assert ok.wait_acked(30.0), ok.status()
            _until(lambda: "odd0" in srv.refused, "the odd robot refused")
            _until(lambda: "state has shape (6,)" in bad.robots[0].streamer.last_error, "reason")
        finally:
            ok.stop()
            bad.stop()
        assert srv.refused == {
            "odd0": "robot odd0 refused: its state has shape (6,), the learner's layout wants (4,);"
            " robots of different specs share one learner through a shared spec (`rlinf spec"
            " --shared ROBOT_A ROBOT_B ...` prints the spec each robot runs)"
        }
    assert bad.robots[0].streamer.acked == -1
    assert sorted(_stored_states(tmp_path / "learner")) == ["arm0"]  # nothing of odd0 stored


def test_robots_of_different_specs_share_one_learner_through_a_shared_spec(
    tmp_path: Path,
) -> None:
    """A twin with a goal feature and a wrist camera, a robot with a second camera and no goal:
    in their own layouts the second is refused by a learner of the first's; each running its
    spec restricted to the shared one, one ingest of the shared layout stores every step."""
    act = ActionSpace("joint_delta", 8)
    wrist = CameraSpec("wrist", 8, 8)
    twin = RobotSpec((StateField("joint_pos", 7), StateField("goal_pos", 3)), act, cameras=(wrist,))
    real = RobotSpec(
        (StateField("joint_pos", 7), StateField("gripper_width", 1)),
        act,
        cameras=(CameraSpec("front", 8, 8), wrist),
        base_position=(-0.5, 0.0, 0.0),
    )
    shared = shared_spec({"twin": twin, "real": real})
    layouts = {n: StepLayout.from_spec(s) for n, s in (("twin", twin), ("real", real))}
    assert layouts["twin"] != layouts["real"]

    def run(root: Path, server: StepLayout, robots: dict[str, StepLayout]) -> IngestServer:
        """Replay 2 episodes of 6 steps per robot into one ingest of layout ``server``."""
        cfg = IngestConfig(store=str(root / "learner"), port=0, token=TOKEN)
        with IngestServer(cfg, layout=server) as srv:
            fleets = {
                f"{n}0": _fleet(root, synthetic_store(root / n, 2, 6, lay), srv.url, n, robots=1)
                for n, lay in robots.items()
            }
            for fleet in fleets.values():
                fleet.start()
            try:
                _until(
                    lambda: all(f.acked_all() or r in srv.refused for r, f in fleets.items()),
                    "every robot acked or refused",
                )
            finally:
                for fleet in fleets.values():
                    fleet.stop()
            return srv

    srv = run(tmp_path / "own", layouts["twin"], layouts)
    assert list(srv.refused) == ["real0"]
    assert "its state has shape (8,), the learner's layout wants (10,)" in srv.refused["real0"]
    assert srv.refused["real0"].endswith(
        "(`rlinf spec --shared ROBOT_A ROBOT_B ...` prints the spec each robot runs)"
    )
    assert sorted(_stored_states(tmp_path / "own" / "learner")) == ["twin0"]

    restricted = {
        n: StepLayout.from_spec(restrict(s, shared)) for n, s in (("twin", twin), ("real", real))
    }
    assert restricted["twin"] == restricted["real"] == StepLayout(7, 8, {"wrist": (8, 8)})
    srv = run(tmp_path / "shared", StepLayout.from_spec(shared), restricted)
    assert srv.refused == {}
    stored = _stored_states(tmp_path / "shared" / "learner")
    want = [float(1000 * e + j) for e in range(2) for j in range(6)]
    assert stored == {"twin0": want, "real0": want}  # every step of both robots, once


def test_per_robot_replay_is_the_replay_per_robot_key() -> None:
    from learner.offpolicy.config import OffPolicyConfig
    from learner.offpolicy.learner import replay_config
    from rlinf_contracts.config import ConfigError
    from rlinf_contracts.config.typed import from_dict

    assert not replay_config(OffPolicyConfig()).per_robot  # pooled, as before
    cfg = from_dict(OffPolicyConfig, {"replay": {"per_robot": True}})
    assert replay_config(cfg).per_robot
    with pytest.raises(ConfigError, match="per_robot"):
        from_dict(OffPolicyConfig, {"replay": {"per_robot": "sometimes"}})


def test_the_fair_drain_and_fsync_are_run_config_keys(tmp_path: Path) -> None:
    """``ingest.turn_items`` / ``ingest.fsync`` of a run reach the ingest server it starts."""
    from learner.offpolicy.config import OffPolicyConfig
    from learner.offpolicy.remote import ingest_config
    from rlinf_contracts.config import ConfigError
    from rlinf_contracts.config.typed import from_dict

    store = str(tmp_path / "store")
    cfg = from_dict(OffPolicyConfig, {"ingest": {"turn_items": 64, "fsync": True, "store": store}})
    server = ingest_config(cfg, TOKEN)
    assert (server.turn_items, server.fsync, server.store) == (64, True, store)
    assert ingest_config(from_dict(OffPolicyConfig, {}), TOKEN).turn_items == TURN  # default
    with pytest.raises(ConfigError, match="ingest.turn_items"):
        from_dict(OffPolicyConfig, {"ingest": {"turn_items": 0}})
