"""Kill loops: a writer SIGKILLed at random points, hundreds of times, loses nothing it reported.

A fork server: this process imports zarr once and forks one writer per round. The writer reports
each committed item through a pipe *after* the call that commits it returned (a pipe keeps what
a killed writer wrote), and dies by SIGKILL -- either from its own test hook at a named internal
point (inside ``begin``, between a step's rows and its commit, inside ``end`` / ``discard``, between
a spool's segment and its first record ...) or from this process at a random instant. After each
kill the store reopens read-only and for appending, and every reported item reads back.
"""

from __future__ import annotations

import os
import random
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stream_driver import EPISODE, item

from rlinf_contracts import commit
from rlinf_contracts.episode import EpisodeInfo, Step, StepLayout
from rlinf_data.store import EpisodeStore
from rlinf_ros.spool import HEADER, Spool

LAYOUT = StepLayout(state_dim=3, action_dim=2, cameras={"cam": (4, 4)})
STORE_POINTS = [
    "begin.group_staged",
    "begin.array_staged",
    "begin.renamed",
    "append.grown",
    "append.rows_written",
    "commit.tmp_written",
    "end.final_array",
    "end.trimmed",
    "discard.moved",
]
SPOOL_POINTS = ["spool.segment_created", "spool.record_written", "spool.old_segment_removed"]


def _suicide_at(point: str, occurrence: int) -> Callable[[str], None]:
    seen = [0]

    def hook(name: str) -> None:
        if name == point:
            seen[0] += 1
            if seen[0] == occurrence:
                os.kill(os.getpid(), signal.SIGKILL)

    return hook


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (the wall time depends on the load)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _round(child: Callable[[Callable[[str], None]], None], timer_s: float) -> list[str]:
    """Fork ``child(report)``, SIGKILL it after ``timer_s`` unless its hook did; its report
    lines."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: never returns into pytest
        os.close(r)
        try:
            child(lambda line: os.write(w, (line + "\n").encode()))
        except BaseException:
            os.write(w, ("X " + traceback.format_exc().replace("\n", " | ") + "\n").encode())
            os._exit(1)
        os._exit(0)
    os.close(w)
    out, deadline, killed = b"", time.monotonic() + timer_s, False
    while True:
        left = deadline - time.monotonic()
        if left <= 0 and not killed:
            os.kill(pid, signal.SIGKILL)
            killed = True
        ready, _, _ = select.select([r], [], [], max(left, 0.05) if not killed else 5.0)
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            out += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    lines = out.decode().splitlines()
    errors = [ln for ln in lines if ln.startswith("X ")]
    assert not errors, errors[0]
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (status, lines[-3:])
    return lines


# ------------------------------------------------------------------------------------ the store
def _state(ep: int, i: int) -> np.ndarray:
    return np.array([ep, i, ep * 7 + i], np.float32)


def _store_writer(path: Path, seed: int, point: str | None, occurrence: int) -> Callable:
    def run(report: Callable[[str], None]) -> None:
        if point is not None:
            commit.TEST_CRASH_HOOK = _suicide_at(point, occurrence)
        rng = random.Random(seed)
        store = EpisodeStore(path)
        long_first = (
            point in (None, "append.grown") and occurrence > 1
        )  # grows past a chunk (256 rows)
        while True:
            w = store.begin(EpisodeInfo(task="kill", layout=LAYOUT, source="online"))
            report(f"B {w.index}")
            for i in range(260 if long_first else rng.choice([0, 1, 2, 3, 5, 12])):
                w.append(
                    Step(
                        state=_state(w.index, i),
                        action=np.full(2, i, np.float32),
                        reward=float(i),
                        images={"cam": np.full((4, 4, 3), i % 251, np.uint8)},
                    )
                )
                report(f"S {w.index} {i}")
            fate = rng.random()
            if fate < 0.25:
                report(f"d {w.index}")  # in flight: may or may not have happened when killed
                store.discard(w.index)
                report(f"D {w.index}")
            else:
                status = "complete" if fate < 0.7 else "aborted"
                final = (
                    {"state": _state(w.index, -1), "images/cam": np.zeros((4, 4, 3), np.uint8)}
                    if fate < 0.5
                    else None
                )
                report(f"e {w.index}")
                w.end(status=status, final=final)
                report(f"E {w.index} {status} {int(final is not None)}")
            long_first = False

    return run


def _check_store(path: Path, expected: dict[int, dict], only: set[int] | None = None) -> None:
    for mode in ("r", "a") if only is not None else ("r", "a", "r"):
        store = EpisodeStore(path, mode=mode)
        names = [int(n) for n in store._names()]
        pos = {n: k for k, n in enumerate(names)}
        for ep, want in expected.items():
            if only is not None and ep not in only:
                continue
            if want["discarded"]:  # gone, unless a begin that reuses its index was in flight
                assert ep not in pos or (
                    len(store.read(pos[ep])) == 0
                    and store.info(pos[ep]).status in ("open", "aborted")
                ), f"episode {ep} was discarded but reads back"
                continue
            if want["flight"] == "d" and (
                ep not in pos or len(store.read(pos[ep])) == 0 < want["steps"]
            ):
                # its discard committed before the kill (and a begin in flight may reuse its index)
                continue
            assert ep in pos, f"episode {ep} was begun (reported) but is missing ({mode}): {names}"
            got = store.read(pos[ep])
            n = want["steps"]
            assert n <= len(got) <= n + 1, f"episode {ep}: {len(got)} rows, {n} reported ({mode})"
            assert np.array_equal(
                got.steps["state"],
                np.stack([_state(ep, i) for i in range(len(got))])
                if len(got)
                else np.zeros((0, 3), np.float32),
            ), ep
            assert np.array_equal(got.steps["images/cam"][:, 0, 0, 0], np.arange(len(got)) % 251), (
                ep
            )
            if want["end"] is not None:
                status, has_final = want["end"]
                assert (got.info.status, got.final is not None) == (
                    status,
                    bool(has_final and len(got)),
                ), ep
                assert len(got) == n, ep
            elif want["flight"] == "e" and got.info.status != "open":
                assert len(got) == n, (
                    ep
                )  # its end committed (any status) or was aborted on reopening
            elif mode == "a" or (mode == "r" and want.get("reopened")):
                assert got.info.status == "aborted", (ep, got.info.status, mode)
        if mode == "a":
            for ep in expected:
                expected[ep]["reopened"] = True
        if only is None:
            assert len(list(store)) == len(names)


def _store_loop(tmp_path: Path, rounds: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    path, expected, hits = tmp_path / "store0", {}, {}
    for k in range(rounds):
        if k and k % 40 == 0:  # a fresh store now and then keeps each reopen cheap
            _check_store(path, expected)
            path, expected = tmp_path / f"store{k}", {}
        point = rng.choice(STORE_POINTS) if rng.random() < 0.75 else None
        # the per-step points land anywhere in an episode; the rarer ones at their first or second
        # hit
        occurrence = (
            rng.randint(1, 20)
            if point in ("append.rows_written", "commit.tmp_written")
            else rng.choice([1, 1, 1, 2])
        )
        lines = _round(
            _store_writer(path, rng.randrange(1 << 30), point, occurrence),
            timer_s=rng.uniform(0.03, 0.2) if point is None else 1.5,
        )
        touched = set()
        for ln in lines:
            kind, ep, *rest = ln.split()
            ep = int(ep)
            touched.add(ep)
            if kind == "B":
                expected[ep] = {"steps": 0, "end": None, "discarded": False, "flight": None}
            elif kind in ("d", "e"):
                expected[ep]["flight"] = kind
            elif kind == "S":
                expected[ep]["steps"] = int(rest[0]) + 1
            elif kind == "E":
                expected[ep]["end"] = (rest[0], int(rest[1]))
            elif kind == "D":
                expected[ep]["discarded"] = True
        if lines:
            last = int(lines[-1].split()[1])
            touched.add(last + 1)  # an episode begun but not reported: whole or absent, never torn
        _check_store(path, expected, only=touched & set(expected))
        hits[point or "timer"] = hits.get(point or "timer", 0) + 1
    _check_store(path, expected)
    return hits


def test_store_survives_sigkill_at_any_point(tmp_path: Path) -> None:
    """The default tier: every crash point several times (a round costs ~0.3 s of CPU)."""
    t, cpu = time.perf_counter(), _cpu()
    hits = _store_loop(tmp_path, rounds=60, seed=1)
    print(
        f"store kill loop: 60 rounds in {time.perf_counter() - t:.1f} s ({_cpu() - cpu:.1f} "
        f"s CPU), kills by point {hits}"
    )
    assert sum(hits.values()) == 60 and len(hits) == len(STORE_POINTS) + 1


@pytest.mark.slow
def test_store_survives_sigkill_200_rounds(tmp_path: Path) -> None:
    t, cpu = time.perf_counter(), _cpu()
    hits = _store_loop(tmp_path, rounds=200, seed=2)
    print(
        f"store kill loop: 200 rounds in {time.perf_counter() - t:.1f} s ({_cpu() - cpu:.1f} "
        f"s CPU), kills by point {hits}"
    )
    assert sum(hits.values()) == 200 and len(hits) == len(STORE_POINTS) + 1


# ------------------------------------------------------------------------------------ the spool
def _payload(seq: int) -> bytes:
    return f"frame {seq} ".encode() * (1 + seq % 7)


def _spool_writer(path: Path, seed: int, point: str | None, occurrence: int) -> Callable:
    def run(report: Callable[[str], None]) -> None:
        if point is not None:
            commit.TEST_CRASH_HOOK = _suicide_at(point, occurrence)
        rng = random.Random(seed)
        s = Spool(path, max_bytes=6000, segment_bytes=600)
        acked = -1
        while True:
            seq = s.append(_payload)
            if seq is None or rng.random() < 0.1:  # full: the learner acknowledges a prefix
                upto = rng.randint(acked, s.next_seq - 1)
                report(f"a {upto}")  # the learner holds them: from here they may go
                s.ack(upto)
                acked = max(acked, upto)
                report(f"A {upto}")
                if s.pending_count() == 0 and rng.random() < 0.5:
                    s.skip_to(s.next_seq + rng.randint(1, 5))
                    report(f"K {s.next_seq}")
            else:
                report(f"S {seq}")

    return run


def _tear_tail(path: Path, rng: random.Random) -> None:
    """What a kill in the middle of a record's write (or a power cut) leaves: a part of a record."""
    tail = sorted(path.glob("*.seg"))[-1]
    record = HEADER.pack(10**9, 50, 0) + b"x" * 50
    with open(tail, "ab") as f:
        f.write(record[: rng.randint(1, len(record) - 1)])


def _spool_loop(tmp_path: Path, rounds: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    path, hits = tmp_path / "spool", {}
    last, acked, floor, live = -1, -1, 0, set()  # live: reported and not acknowledged
    for _ in range(rounds):
        point = rng.choice(SPOOL_POINTS) if rng.random() < 0.7 else None
        lines = _round(
            _spool_writer(path, rng.randrange(1 << 30), point, rng.choice([1, 2, 5])),
            timer_s=rng.uniform(0.02, 0.2) if point is None else 3.0,
        )
        for ln in lines:
            kind, v = ln.split()
            if kind == "S":
                assert int(v) >= max(last + 1, floor), (
                    ln,
                    last,
                    floor,
                )  # numbering never goes back
                last = int(v)
                live.add(last)
            elif kind == "A":
                acked = max(acked, int(v))
            elif kind == "a":  # acknowledged by the learner: the spool may delete them
                live = {q for q in live if q > int(v)}
            elif kind == "K":
                floor = int(v)
        if rng.random() < 0.3:
            _tear_tail(path, rng)
        s = Spool(path, max_bytes=6000, segment_bytes=600)
        try:
            assert s.next_seq >= max(last + 1, floor), (s.next_seq, last, floor)
            frames = s.read(acked, max_items=10**6)
            seqs = [q for q, _ in frames]
            assert seqs == sorted(seqs) and all(p == _payload(q) for q, p in frames)
            assert live <= set(seqs), f"reported frames lost: {sorted(live - set(seqs))[:10]}"
        finally:
            s.close()
        hits[point or "timer"] = hits.get(point or "timer", 0) + 1
    return hits


def _spool_rounds(tmp_path: Path, rounds: int, seed: int) -> None:
    t, cpu = time.perf_counter(), _cpu()
    hits = _spool_loop(tmp_path, rounds=rounds, seed=seed)
    print(
        f"spool kill loop: {rounds} rounds in {time.perf_counter() - t:.1f} s "
        f"({_cpu() - cpu:.1f} s CPU), kills by point {hits}"
    )
    assert sum(hits.values()) == rounds and len(hits) == len(SPOOL_POINTS) + 1


def test_spool_survives_sigkill_at_any_point(tmp_path: Path) -> None:
    """The default tier: every crash point several times."""
    _spool_rounds(tmp_path, 80, seed=3)


@pytest.mark.slow
def test_spool_survives_sigkill_200_rounds(tmp_path: Path) -> None:
    _spool_rounds(tmp_path, 200, seed=5)


# ------------------------------------------------------------------------ spool + ingest together
def _ingest_writer(spool_dir: Path, store: Path, seed: int, point: str | None) -> Callable:
    def run(report: Callable[[str], None]) -> None:
        from rlinf_contracts.transitions import TransitionBatch, batch_frame
        from rlinf_contracts.wire import Packer, unpackb
        from rlinf_data.ingest import Ledger

        if point is not None:
            hook = _suicide_at(point, random.Random(seed).choice([1, 2, 4]))
            commit.TEST_CRASH_HOOK = hook
        rng, packer = random.Random(seed), Packer()
        s = Spool(spool_dir, max_bytes=1 << 20, segment_bytes=4000)
        ledger = Ledger(EpisodeStore(store))
        acked = ledger.last_seq("arm0")  # what the learner's welcome says
        while True:
            for _ in range(rng.randint(1, 6)):  # the robot produces
                seq = s.append(lambda q: packer.pack(item(q).to_wire()))
                report(f"S {seq}")
            frames = s.read(
                acked, rng.randint(1, 8)
            )  # the streamer sends, the ingest stores and acks
            items = TransitionBatch.from_wire(
                unpackb(batch_frame("arm0", [f for _, f in frames]))
            ).items
            ack = ledger.apply("arm0", items)
            report(f"A {ack.acked}")
            s.ack(ack.acked)
            acked = ack.acked

    return run


def _spool_ingest_loop(tmp_path: Path, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    spool_dir, store = tmp_path / "spool", tmp_path / "store"
    produced, acked = -1, -1
    t, cpu = time.perf_counter(), _cpu()
    for _ in range(rounds):
        point = rng.choice(STORE_POINTS[:-1] + SPOOL_POINTS) if rng.random() < 0.7 else None
        lines = _round(
            _ingest_writer(spool_dir, store, rng.randrange(1 << 30), point),
            timer_s=rng.uniform(0.1, 0.6) if point is None else 4.0,
        )
        for ln in lines:
            kind, v = ln.split()
            if kind == "S":
                produced = int(v)
            else:
                acked = max(acked, int(v))
        ids = [int(v) for ep in EpisodeStore(store, mode="r") for v in ep.steps["state"][:, 0]]
        assert len(ids) == len(set(ids)), (
            f"stored twice: {sorted({i for i in ids if ids.count(i) > 1})[:10]}"
        )
        want = {q for q in range(acked + 1) if q % EPISODE != EPISODE - 1}
        assert want <= set(ids), f"acknowledged but not stored: {sorted(want - set(ids))[:10]}"
        assert set(ids) <= set(range(produced + 2)), "stored a transition nobody produced"
    # no more kills: the rest drains, and every produced step is stored exactly once
    from rlinf_contracts.transitions import TransitionBatch, batch_frame
    from rlinf_contracts.wire import unpackb
    from rlinf_data.ingest import Ledger

    s = Spool(spool_dir, max_bytes=1 << 20, segment_bytes=4000)
    ledger = Ledger(EpisodeStore(store))
    frames = s.read(ledger.last_seq("arm0"), 10**6)
    if frames:
        ledger.apply(
            "arm0",
            TransitionBatch.from_wire(unpackb(batch_frame("arm0", [f for _, f in frames]))).items,
        )
    total = s.next_seq
    s.close()
    ids = [int(v) for ep in EpisodeStore(store, mode="r") for v in ep.steps["state"][:, 0]]
    assert sorted(ids) == [q for q in range(total) if q % EPISODE != EPISODE - 1]
    print(
        f"spool + ingest kill loop: {rounds} rounds in {time.perf_counter() - t:.1f} s "
        f"({_cpu() - cpu:.1f} s CPU), {total} items"
    )


def test_spool_and_ingest_survive_sigkill_exactly_once(tmp_path: Path) -> None:
    _spool_ingest_loop(tmp_path, rounds=30, seed=4)


@pytest.mark.slow
def test_spool_and_ingest_survive_sigkill_exactly_once_200_rounds(tmp_path: Path) -> None:
    # four fresh spool + store pairs of 50 rounds: each round re-reads the whole store, so one
    # pair of 200 rounds would cost ~4x as much for the same kill points
    for seed in range(5, 9):
        _spool_ingest_loop(tmp_path / f"pair{seed}", rounds=50, seed=seed)
