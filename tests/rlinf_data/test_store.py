"""Episode store: round trip, plain-zarr readability, statuses, and kill -9 mid-episode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from rlinf_contracts.episode import EpisodeError, EpisodeInfo, Step, StepLayout
from rlinf_data.store import EpisodeStore

LAYOUT = StepLayout(state_dim=4, action_dim=2, cameras={"wrist": (8, 6)})


def step(i: int, **kw) -> Step:
    return Step(
        state=np.full(4, i, np.float32),
        action=np.full(2, -i, np.float32),
        reward=0.5 * i,
        policy_version=i,
        timestamp=0.1 * i,
        images={"wrist": np.full((8, 6, 3), i % 256, np.uint8)},
        **kw,
    )


def test_round_trip_and_plain_zarr(tmp_path: Path) -> None:
    store = EpisodeStore(tmp_path / "s")
    with store.begin(EpisodeInfo(task="push", layout=LAYOUT, source="online")) as w:
        for i in range(300):  # crosses a chunk boundary
            w.append(step(i, truncated=i == 299))
        w.end(
            success=True,
            final={"state": np.ones(4, np.float32), "images/wrist": np.zeros((8, 6, 3), np.uint8)},
        )
    ep = EpisodeStore(tmp_path / "s", mode="r").read(0)
    assert (len(ep), ep.info.status, ep.info.success, ep.info.source) == (
        300,
        "truncated",
        True,
        "online",
    )
    assert np.array_equal(ep.steps["state"][:, 0], np.arange(300, dtype=np.float32))
    assert np.array_equal(ep.steps["policy_version"], np.arange(300))
    assert ep.steps["truncated"].sum() == 1 and ep.final["state"].tolist() == [1, 1, 1, 1]
    g = zarr.open_group(str(tmp_path / "s"), mode="r")["episodes/000000"]
    assert g["images/wrist"].shape == (300, 8, 6, 3) and g.attrs["length"] == 300
    assert g["reward"][10] == 5.0


def test_a_bad_step_names_the_field(tmp_path: Path) -> None:
    w = EpisodeStore(tmp_path / "s").begin(EpisodeInfo(task="push", layout=LAYOUT))
    bad = step(1)
    bad.images["wrist"] = np.zeros((8, 6, 3), np.float32)
    with pytest.raises(EpisodeError, match="'images/wrist'"):
        w.append(bad)
    with pytest.raises(EpisodeError, match="source"):
        EpisodeInfo(task="push", layout=LAYOUT, source="teleop")


def test_exception_in_block_aborts_and_open_episode_is_aborted_on_reopen(tmp_path: Path) -> None:
    store = EpisodeStore(tmp_path / "s")
    with pytest.raises(RuntimeError):
        with store.begin(EpisodeInfo(task="push", layout=LAYOUT)) as w:
            w.append(step(0))
            raise RuntimeError("operator pressed stop")
    w = store.begin(EpisodeInfo(task="push", layout=LAYOUT))
    w.append(step(0))
    w.append(step(1))  # never ended: the process "died"
    again = EpisodeStore(tmp_path / "s")
    assert [again.info(i).status for i in range(2)] == ["aborted", "aborted"]
    assert len(again.read(1)) == 2 and zarr.open_group(str(tmp_path / "s"))[
        "episodes/000001/state"
    ].shape == (2, 4)


def test_a_kill_between_creating_an_episode_and_its_arrays_leaves_the_store_readable(
    tmp_path: Path,
) -> None:
    """The SIGKILL window before any step: the episode's group exists, some arrays do not."""
    store = EpisodeStore(tmp_path / "s")
    with store.begin(EpisodeInfo(task="push", layout=LAYOUT)) as w:
        w.append(step(0))
    info = EpisodeInfo(task="push", layout=LAYOUT)
    info.status = "open"
    group = store.root["episodes"].create_group(
        "000001"
    )  # what begin() does before the writer's arrays
    group.attrs.update({"info": info.to_dict(), "length": 0})
    group.create_array("state", shape=(0, 4), chunks=(256, 4), dtype="float32", fill_value=0)
    again = EpisodeStore(tmp_path / "s")
    eps = list(again)
    assert [len(e) for e in eps] == [1, 0] and again.info(1).status == "aborted"
    assert eps[1].steps["reward"].shape == (0,) and eps[1].steps["images/wrist"].shape == (
        0,
        8,
        6,
        3,
    )


def test_a_whole_episodes_write_sizes_its_arrays_once(tmp_path: Path, monkeypatch) -> None:
    """``write`` knows the length: no array is grown and trimmed (zarr's resize of an image
    array visits every per-frame chunk it drops), and the episode reads back whole."""
    store = EpisodeStore(tmp_path / "s")
    with store.begin(EpisodeInfo(task="push", layout=LAYOUT)) as w:
        for i in range(5):
            w.append(step(i))
    resizes = []
    real = zarr.Array.resize
    monkeypatch.setattr(
        zarr.Array, "resize", lambda a, shape: resizes.append(shape) or real(a, shape)
    )
    ep = store.read(0)
    store.write(ep)
    assert resizes == []
    again = store.read(1)
    assert (len(again), again.info.status) == (5, "complete")
    assert all(np.array_equal(again.steps[k], ep.steps[k]) for k in ep.steps)
    g = zarr.open_group(str(tmp_path / "s"), mode="r")["episodes/000001"]
    assert g["images/wrist"].shape == (5, 8, 6, 3) and g.attrs["length"] == 5
    assert g["images/wrist"].chunks == (5, 8, 6, 3)  # one chunk, not a file per frame


def test_append_cost_is_small(tmp_path: Path) -> None:
    """Per-step cost of a state-only step (39-d state, like push): printed, and bounded loosely
    because the 2 test cores are shared."""
    layout = StepLayout(state_dim=39, action_dim=4)
    w = EpisodeStore(tmp_path / "s").begin(EpisodeInfo(task="push", layout=layout))
    s = Step(state=np.zeros(39, np.float32), action=np.zeros(4, np.float32))
    for _ in range(5):
        w.append(s)
    t = time.perf_counter()
    for _ in range(200):
        w.append(s)
    ms = (time.perf_counter() - t) / 200 * 1e3
    print(f"episode store append: {ms:.2f} ms per state-only step")
    assert ms < 25.0


RECORDER = textwrap.dedent("""
    import sys, numpy as np
    from rlinf_contracts.episode import EpisodeInfo, Step, StepLayout
    from rlinf_data.store import EpisodeStore
    store = EpisodeStore(sys.argv[1])
    w = store.begin(EpisodeInfo(task="push", layout=StepLayout(4, 2, {"wrist": (8, 6)})))
    i = 0
    while True:
        w.append(Step(state=np.full(4, i, np.float32), action=np.full(2, -i, np.float32),
                      reward=0.5 * i, images={"wrist": np.full((8, 6, 3), i % 256, np.uint8)}))
        print(i, flush=True)  # step i is committed
        i += 1
""")


def test_sigkill_mid_episode_loses_at_most_the_step_in_flight(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", RECORDER, str(tmp_path / "s")], stdout=subprocess.PIPE, text=True
    )
    committed = -1
    try:
        while committed < 40:
            line = proc.stdout.readline()
            assert line, "recorder died before recording 40 steps"
            committed = int(line)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    rest = proc.stdout.read().split()
    committed = int(rest[-1]) if rest else committed  # steps reported before the kill landed
    store = EpisodeStore(tmp_path / "s")  # reopen for writing: closes the interrupted episode
    ep = store.read(0)
    n = len(ep)
    assert store.info(0).status == "aborted"
    assert committed + 1 <= n <= committed + 2, (
        committed,
        n,
    )  # at most the step in flight is extra/lost
    assert np.array_equal(ep.steps["state"][:, 0], np.arange(n, dtype=np.float32))
    assert np.array_equal(
        ep.steps["images/wrist"][:, 0, 0, 0], (np.arange(n) % 256).astype(np.uint8)
    )
    assert zarr.open_group(str(tmp_path / "s"), mode="r")["episodes/000000/state"].shape == (n, 4)
