"""Batch appends (``EpisodeWriter.append_steps``): the same episodes as step-by-step appends, and
a kill anywhere inside a batch leaves the whole batch or none of it -- in the store alone (fork +
SIGKILL loop, hook-raised kills) and through the ingest ledger that stores a turn per batch."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stream_driver import EPISODE, item
from test_store_killloop import _round, _suicide_at

from rlinf_contracts import commit
from rlinf_contracts.episode import EpisodeError, EpisodeInfo, Step, StepLayout
from rlinf_data.ingest import Ledger
from rlinf_data.store import TIME_CHUNK, EpisodeStore

LAYOUT = StepLayout(state_dim=3, action_dim=2, cameras={"cam": (4, 4)})
BATCH_POINTS = ["append.grown", "append.rows_written", "commit.tmp_written"]
ROUNDS = 16  # kill rounds of the batch loop


class _Killed(BaseException):
    """What the raising hook throws: the writer stops mid-batch as if killed."""


def _step(ep: int, i: int) -> Step:
    rng = np.random.default_rng(ep * 100_003 + i)
    return Step(
        state=np.array([ep, i, rng.normal()], np.float32),
        action=rng.normal(size=2).astype(np.float32),
        reward=float(rng.normal()),
        terminated=bool(rng.random() < 0.1),
        truncated=bool(rng.random() < 0.1),
        intervention=bool(rng.random() < 0.3),
        policy_version=int(rng.integers(0, 1000)),
        timestamp=float(i) * 0.05,
        images={"cam": rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)},
    )


def _raise_at(point: str, occurrence: int) -> Callable[[str], None]:
    seen = [0]

    def hook(name: str) -> None:
        if name == point:
            seen[0] += 1
            if seen[0] == occurrence:
                raise _Killed(point)

    return hook


@pytest.fixture
def crash(monkeypatch):
    def arm(point: str, occurrence: int = 1) -> None:
        monkeypatch.setattr(commit, "TEST_CRASH_HOOK", _raise_at(point, occurrence))

    yield arm
    monkeypatch.setattr(commit, "TEST_CRASH_HOOK", None)


def _assert_same(a: EpisodeStore, b: EpisodeStore) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.info.to_dict() == y.info.to_dict()
        assert x.steps.keys() == y.steps.keys()
        for k in x.steps:
            assert x.steps[k].dtype == y.steps[k].dtype, k
            assert np.array_equal(x.steps[k], y.steps[k]), k
        assert (x.final is None) == (y.final is None)
        for k in x.final or {}:
            assert np.array_equal(x.final[k], y.final[k]), k  # type: ignore[index]  # final is set for these episodes


@pytest.mark.parametrize("fsync", [False, True])
def test_batches_store_exactly_what_step_appends_store(tmp_path: Path, fsync: bool) -> None:
    # sizes cross the 256-row chunk and include a batch larger than a chunk, and empty ones
    plans = [[1], [5, 0, 3], [TIME_CHUNK - 2, 7, 1], [TIME_CHUNK + 44, 16], []]
    one = EpisodeStore(tmp_path / "one", fsync=fsync)
    many = EpisodeStore(tmp_path / "many", fsync=fsync)
    for ep, sizes in enumerate(plans):
        steps = [_step(ep, i) for i in range(sum(sizes))]
        final = {"state": np.full(3, ep, np.float32), "images/cam": np.zeros((4, 4, 3), np.uint8)}
        w1 = one.begin(EpisodeInfo(task="batch", layout=LAYOUT, source="online"))
        for s in steps:
            w1.append(s)
        w1.end(success=ep % 2 == 0, final=final)
        w2 = many.begin(EpisodeInfo(task="batch", layout=LAYOUT, source="online"))
        done = 0
        for n in sizes:
            w2.append_steps(steps[done : done + n])
            done += n
            assert w2.length == done == many.length(ep)
        w2.end(success=ep % 2 == 0, final=final)
    _assert_same(EpisodeStore(tmp_path / "one", mode="r"), EpisodeStore(tmp_path / "many", "r"))
    assert len(EpisodeStore(tmp_path / "many", mode="r").read(3)) == TIME_CHUNK + 60


def test_a_batch_with_a_bad_step_writes_nothing(tmp_path: Path) -> None:
    store = EpisodeStore(tmp_path / "s")
    w = store.begin(EpisodeInfo(task="batch", layout=LAYOUT))
    w.append_steps([_step(0, i) for i in range(3)])
    bad = _step(0, 4)
    bad.state = np.zeros(4, np.float32)
    with pytest.raises(EpisodeError, match="'state'"):
        w.append_steps([_step(0, 3), bad])
    assert w.length == 3 == store.length(0)
    w.append_steps([_step(0, 3)])
    assert store.read(0).steps["state"][:, 1].tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("point", BATCH_POINTS)
def test_a_kill_inside_a_batch_leaves_none_of_it(tmp_path: Path, crash, point: str) -> None:
    store = EpisodeStore(tmp_path / "s")
    w = store.begin(EpisodeInfo(task="batch", layout=LAYOUT))
    w.append_steps([_step(0, i) for i in range(TIME_CHUNK - 3)])
    crash(point)  # the next batch grows the arrays past a chunk, so every point is reached
    with pytest.raises(_Killed):
        w.append_steps([_step(0, i) for i in range(TIME_CHUNK - 3, TIME_CHUNK + 9)])
    ep = EpisodeStore(tmp_path / "s", mode="r").read(0)
    assert (len(ep), ep.info.status) == (TIME_CHUNK - 3, "open")
    crash("none")
    again = EpisodeStore(tmp_path / "s")  # reopening trims the uncommitted rows
    ep = again.read(0)
    assert (len(ep), ep.info.status) == (TIME_CHUNK - 3, "aborted")
    assert ep.steps["state"][:, 1].tolist() == list(range(TIME_CHUNK - 3))
    w = again.begin(EpisodeInfo(task="batch", layout=LAYOUT))
    w.append_steps([_step(1, i) for i in range(4)])
    assert again.read(1).steps["state"][:, 1].tolist() == [0, 1, 2, 3]


# ------------------------------------------------------------------- SIGKILL loop, batch path
def _batch_writer(path: Path, seed: int, point: str | None, occurrence: int) -> Callable:
    """Appends batches of random sizes (one crossing a chunk now and then); reports ``s ep n``
    before a batch (in flight: ``n`` steps once it commits) and ``S ep n`` after it returned."""

    def run(report: Callable[[str], None]) -> None:
        if point is not None:
            commit.TEST_CRASH_HOOK = _suicide_at(point, occurrence)
        rng = random.Random(seed)
        store = EpisodeStore(path)
        while True:
            w = store.begin(EpisodeInfo(task="kill", layout=LAYOUT, source="online"))
            report(f"B {w.index} 0")
            for _ in range(rng.choice([1, 2, 4, 8])):
                n = rng.choice([1, 2, 7, 16, 40, TIME_CHUNK + 5])
                target = w.length + n
                report(f"s {w.index} {target}")
                w.append_steps([_step(w.index, i) for i in range(w.length, target)])
                report(f"S {w.index} {target}")
            report(f"e {w.index} 0")
            w.end()
            report(f"E {w.index} 0")

    return run


def _check_whole_batches(path: Path, expected: dict[int, dict[str, int]]) -> None:
    """Every episode holds exactly its committed batches, or those and the batch in flight."""
    for mode in ("r", "a", "r"):
        store = EpisodeStore(path, mode=mode)
        names = [int(n) for n in store._names()]
        for ep, want in expected.items():
            assert ep in names, f"episode {ep} was begun (reported) but is missing ({mode})"
            got = store.read(names.index(ep))
            n = len(got)
            assert n in (want["committed"], want["flight"]), (
                f"episode {ep}: {n} rows; committed batches end at {want['committed']}, "
                f"the batch in flight at {want['flight']} ({mode}): a torn batch"
            )
            assert got.steps["state"][:, 1].tolist() == list(range(n)), ep
            steps = [_step(ep, i) for i in range(n)]
            actions = np.array([s.action for s in steps], np.float32).reshape(n, 2)
            images = np.array([s.images["cam"] for s in steps], np.uint8).reshape(n, 4, 4, 3)
            assert np.array_equal(got.steps["action"], actions), ep
            assert np.array_equal(got.steps["images/cam"], images), ep
            if mode == "a" or want.get("reopened"):
                assert got.info.status in ("aborted", "complete", "truncated"), ep
            if want["ended"]:
                assert n == want["committed"], ep
        if mode == "a":
            for want in expected.values():
                want["reopened"] = 1


def _parse(lines: list[str], expected: dict[int, dict[str, int]]) -> None:
    for ln in lines:
        kind, ep_s, n_s = ln.split()
        ep, n = int(ep_s), int(n_s)
        if kind == "B":
            expected[ep] = {"committed": 0, "flight": 0, "ended": 0}
        elif kind == "s":
            expected[ep]["flight"] = n
        elif kind == "S":
            expected[ep]["committed"] = expected[ep]["flight"] = n
        elif kind == "E":
            expected[ep]["ended"] = 1


def test_sigkill_inside_batches_leaves_whole_batches_only(tmp_path: Path) -> None:
    """16 forked writers, each SIGKILLed at a batch's crash point or at a random instant; two
    stores of 8 rounds each (the rounds of one store accumulate episodes). Every crash point and
    the timer are hit (asserted); the general kill loop (test_store_killloop.py) covers the rest."""
    rng = random.Random(11)
    hits: dict[str, int] = {}
    stores: dict[Path, dict[int, dict[str, int]]] = {}
    for k in range(ROUNDS):
        path = tmp_path / f"store{k // 8}"
        expected = stores.setdefault(path, {})
        point = rng.choice(BATCH_POINTS) if rng.random() < 0.8 else None
        lines = _round(
            _batch_writer(path, rng.randrange(1 << 30), point, rng.randint(1, 6)),
            timer_s=rng.uniform(0.05, 0.4) if point is None else 3.0,
        )
        _parse(lines, expected)
        _check_whole_batches(path, expected)
        hits[point or "timer"] = hits.get(point or "timer", 0) + 1
    print(f"batch kill loop: {ROUNDS} rounds, kills by point {hits}")
    assert set(hits) == {*BATCH_POINTS, "timer"}


# ------------------------------------------------------------------------ the ingest's turns
def test_the_ledger_stores_a_turn_of_one_episode_in_one_write(tmp_path: Path, monkeypatch) -> None:
    writes = []
    monkeypatch.setattr(commit, "TEST_CRASH_HOOK", writes.append)
    ledger = Ledger(EpisodeStore(tmp_path / "s"))
    writes.clear()
    ack = ledger.apply("arm0", [item(s) for s in range(EPISODE - 1)])  # 10 steps, no end
    assert ack.acked == EPISODE - 2
    assert writes.count("append.rows_written") == 1
    assert EpisodeStore(tmp_path / "s", mode="r").length(0) == EPISODE - 1


@pytest.mark.parametrize("occurrence", [1, 2])
def test_a_kill_inside_a_turn_leaves_a_prefix_of_whole_batches(
    tmp_path: Path, crash, occurrence: int
) -> None:
    """A turn spanning an episode's end is two batches: a kill in the first keeps none of the
    turn, in the second keeps the first batch and the end; a resend stores the rest once."""
    ledger = Ledger(EpisodeStore(tmp_path / "s"))
    ledger.apply("arm0", [item(s) for s in range(6)])
    crash("append.rows_written", occurrence)
    with pytest.raises(_Killed):
        ledger.apply("arm0", [item(s) for s in range(6, EPISODE + 5)])  # 6..9, end, 11..15
    crash("none")
    store = EpisodeStore(tmp_path / "s")
    lengths = [store.length(i) for i in range(len(store))]
    want_last = 5 if occurrence == 1 else EPISODE - 1
    assert lengths == ([6] if occurrence == 1 else [EPISODE - 1, 0])
    again = Ledger(store)
    assert again.last_seq("arm0") == want_last
    ack = again.apply("arm0", [item(s) for s in range(3 * EPISODE)])
    assert (ack.acked, ack.duplicates) == (3 * EPISODE - 1, want_last + 1)
    ids = [int(v) for ep in EpisodeStore(tmp_path / "s", mode="r") for v in ep.steps["state"][:, 0]]
    assert ids == [s for s in range(3 * EPISODE) if s % EPISODE != EPISODE - 1]
