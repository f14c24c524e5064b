"""Torn states a kill leaves in an episode store: every reader takes them as empty aborted
episodes (one warning each), reopening for writing repairs them, and the writer's own
operations (begin, end, discard) each have one commit point."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import zarr

from rlinf_contracts import commit
from rlinf_contracts.episode import EpisodeInfo, Step, StepLayout
from rlinf_data.store import EpisodeStore

LAYOUT = StepLayout(state_dim=3, action_dim=2)


def _step(i: int) -> Step:
    return Step(state=np.full(3, i, np.float32), action=np.zeros(2, np.float32), reward=float(i))


def _good(store: EpisodeStore, n: int, source: str = "online") -> int:
    with store.begin(EpisodeInfo(task="push", layout=LAYOUT, source=source)) as w:
        for i in range(n):
            w.append(_step(i))
        return w.index


def _legacy_torn_store(path: Path) -> Path:
    """Episode 0 good, 1 a group without ``info`` (the old two-write begin killed between its
    writes), 2 a directory without ``zarr.json`` (killed while the group itself was written), 3
    good."""
    store = EpisodeStore(path)
    _good(store, 2)
    g = zarr.open_group(str(path), mode="a")["episodes"].create_group("000001")
    g.create_array("state", shape=(0, 3), chunks=(256, 3), dtype="float32", fill_value=0)
    (path / "episodes/000002").mkdir()
    (path / "episodes/000002/zarr.abc123.partial").write_bytes(b'{"attri')
    _good(store, 3)
    return path


class _Learner:  # what OffPolicyLearner.refill touches
    def __init__(self) -> None:
        from rlinf_data.replay import ReplayBuffer, ReplayConfig

        self.online_reward = None
        self.replay = ReplayBuffer(LAYOUT, ReplayConfig(capacity=100, mix={"online": 1.0}))
        self.added: list[int] = []

    def ingest_episode(self, ep, count: bool = True) -> None:
        self.replay.add_episode(ep, "online")
        self.added.append(len(ep))

    def add_interventions(self, ep) -> None:
        pass


def test_torn_groups_read_as_empty_aborted_in_every_reader(tmp_path: Path, caplog) -> None:
    path = _legacy_torn_store(tmp_path / "s")
    caplog.set_level(logging.WARNING)
    store = EpisodeStore(path, mode="r")
    assert len(store) == 4
    for _ in range(3):  # repeated access: still one warning per torn group
        assert [store.info(i).status for i in range(4)] == [
            "complete",
            "aborted",
            "aborted",
            "complete",
        ]
        assert [store.length(i) for i in range(4)] == [2, 0, 0, 3]
        assert [len(ep) for ep in store] == [2, 0, 0, 3]
    assert store.info(1).layout == StepLayout(0, 0) and "no 'info'" in store.info(1).extra["torn"]
    assert store.read(2).steps["state"].shape == (0, 0)
    torn_warnings = [r for r in caplog.records if "is torn" in r.getMessage()]
    assert len(torn_warnings) == 2, [r.getMessage() for r in torn_warnings]

    from learner.offpolicy.learner import OffPolicyLearner, load_demos

    stub = _Learner()
    assert OffPolicyLearner.refill(stub, path) == 2 and stub.added == [2, 3]  # type: ignore[arg-type]  # a stub
    from rlinf_data.replay import ReplayBuffer, ReplayConfig

    assert (
        load_demos(
            ReplayBuffer(LAYOUT, ReplayConfig(capacity=100, mix={"demo": 1.0})), str(path), LAYOUT
        )
        == 5
    )

    from rlinf_data.lerobot import export_lerobot, import_lerobot

    out = export_lerobot(EpisodeStore(path, mode="r"), tmp_path / "lerobot")
    assert [len(ep) for ep in import_lerobot(out)] == [2, 3]

    from rlinf_data.ingest import Ledger

    assert Ledger(EpisodeStore(path, mode="r")).robots == {}


def test_append_mode_repairs_torn_groups_once(tmp_path: Path, caplog) -> None:
    path = _legacy_torn_store(tmp_path / "s")
    store = EpisodeStore(path)  # repairs
    assert not list((path / "episodes/000002").glob("*.partial"))
    for name in ("000001", "000002"):
        info = json.loads((path / "episodes" / name / "zarr.json").read_text())["attributes"][
            "info"
        ]
        assert info["status"] == "aborted" and info["extra"]["torn"]
    caplog.set_level(logging.WARNING)
    caplog.clear()
    again = EpisodeStore(path, mode="r")
    assert [again.info(i).status for i in range(4)] == [
        "complete",
        "aborted",
        "aborted",
        "complete",
    ]
    assert [len(e) for e in again] == [2, 0, 0, 3]
    assert not [r for r in caplog.records if "torn" in r.getMessage()]  # a clean store now
    assert _good(store, 1) == 4


class _Killed(BaseException):
    """Stands for SIGKILL at a crash point (nothing of the writer runs after it)."""


def _raise_at(point: str, occurrence: int = 1):
    seen = {"n": 0}

    def hook(name: str) -> None:
        if name == point:
            seen["n"] += 1
            if seen["n"] == occurrence:
                raise _Killed(point)

    return hook


@pytest.fixture
def crash(monkeypatch):
    def arm(point: str, occurrence: int = 1) -> None:
        monkeypatch.setattr(commit, "TEST_CRASH_HOOK", _raise_at(point, occurrence))

    yield arm
    monkeypatch.setattr(commit, "TEST_CRASH_HOOK", None)


@pytest.mark.parametrize("point", ["begin.group_staged", "begin.array_staged"])
def test_a_kill_inside_begin_leaves_no_episode(tmp_path: Path, crash, point: str) -> None:
    store = EpisodeStore(tmp_path / "s")
    _good(store, 1)
    crash(point, 2 if point == "begin.array_staged" else 1)
    with pytest.raises(_Killed):
        store.begin(EpisodeInfo(task="push", layout=LAYOUT))
    assert (
        len(EpisodeStore(tmp_path / "s", mode="r")) == 1
    )  # staged, never renamed in: not an episode
    crash("none")
    again = EpisodeStore(tmp_path / "s")
    assert not list((tmp_path / "s").glob(".staging-*")) and _good(again, 1) == 1


def test_a_kill_inside_end_keeps_the_committed_steps(tmp_path: Path, crash) -> None:
    store = EpisodeStore(tmp_path / "s")
    w = store.begin(EpisodeInfo(task="push", layout=LAYOUT))
    for i in range(3):
        w.append(_step(i))
    crash("end.final_array")
    with pytest.raises(_Killed):
        w.end(final={"state": np.ones(3, np.float32)})
    ep = EpisodeStore(tmp_path / "s", mode="r").read(0)
    assert (len(ep), ep.info.status, ep.final) == (3, "open", None)  # the end never committed
    crash("none")
    ep = EpisodeStore(tmp_path / "s").read(0)
    assert (len(ep), ep.info.status, ep.final) == (3, "aborted", None)
    assert not (tmp_path / "s/episodes/000000/final").exists()


def test_a_kill_inside_discard_removes_the_episode_whole(tmp_path: Path, crash) -> None:
    store = EpisodeStore(tmp_path / "s")
    _good(store, 2)
    _good(store, 2)
    crash("discard.moved")
    with pytest.raises(_Killed):
        store.discard(1)
    assert len(EpisodeStore(tmp_path / "s", mode="r")) == 1
    crash("none")
    EpisodeStore(tmp_path / "s")
    assert not list((tmp_path / "s").glob(".trash-*"))
    with pytest.raises(IndexError, match="000007"):
        store.discard(7)


def test_a_store_killed_while_being_created_opens(tmp_path: Path) -> None:
    """The old creation wrote the root group, then its format key: both halves reopen."""
    zarr.open_group(str(tmp_path / "s"), mode="a")  # root without the format key, no members
    assert len(EpisodeStore(tmp_path / "s", mode="r")) == 0
    assert _good(EpisodeStore(tmp_path / "s"), 1) == 0
