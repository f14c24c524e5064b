"""The one demo reader: both source kinds give the same episodes, stepless (torn, aborted) ones
are skipped as the store reads them, and a bad path or a missing feature fails naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from rlinf_contracts.config import ConfigError
from rlinf_contracts.episode import Episode, EpisodeInfo, Step, StepLayout
from rlinf_data.demos import DEMO_FORMATS, DemoError, demo_kind, open_demos
from rlinf_data.lerobot import export_lerobot
from rlinf_data.store import EpisodeStore

LAYOUT = StepLayout(state_dim=3, action_dim=2, cameras={"wrist": (16, 16)})


def _episode(n: int, seed: int, source: str = "demo", instruction: str = "push") -> Episode:
    rng = np.random.default_rng(seed)
    steps = Step(np.zeros(3, np.float32), np.zeros(2, np.float32)).arrays()
    steps = {k: np.repeat(v[None], n, 0) for k, v in steps.items() if k != "images/wrist"}
    steps["state"] = rng.normal(size=(n, 3)).astype(np.float32)
    steps["action"] = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    steps["images/wrist"] = rng.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8)
    steps["terminated"][-1] = True
    info = EpisodeInfo(
        task="push", layout=LAYOUT, instruction=instruction, source=source, status="complete"
    )
    return Episode(info, steps)


def _store(path: Path, lengths: tuple[int, ...] = (2, 3), **kw: str) -> Path:
    store = EpisodeStore(path)
    for i, n in enumerate(lengths):
        store.write(_episode(n, i, **kw))
    return path


def test_the_source_kinds_are_a_registry_picked_by_the_files_at_the_path(tmp_path):
    assert DEMO_FORMATS.names() == ["episode_store", "lerobot"]
    store = _store(tmp_path / "store")
    lerobot = export_lerobot(EpisodeStore(store, mode="r"), tmp_path / "lerobot")
    assert (demo_kind(store), demo_kind(lerobot), demo_kind(tmp_path)) == (
        "episode_store",
        "lerobot",
        None,
    )
    a = open_demos(store, key="data.demos", need=["images/wrist", "instruction"]).episodes()
    b = open_demos(lerobot, key="data.demos", need=["images/wrist", "instruction"]).episodes()
    assert [len(ep) for ep in a] == [len(ep) for ep in b] == [2, 3]
    for x, y in zip(a, b, strict=True):
        assert x.info.instruction == y.info.instruction == "push"
        for k in ("state", "action", "images/wrist", "terminated"):
            np.testing.assert_array_equal(x.steps[k], y.steps[k])
    assert open_demos(store, key="data.demos").episodes(limit=1)[0].info.layout == LAYOUT


def test_stepless_episodes_are_skipped_as_the_store_reads_them(tmp_path):
    path = tmp_path / "s"
    store = EpisodeStore(path)
    store.write(_episode(2, 0))
    g = zarr.open_group(str(path), mode="a")["episodes"].create_group("000001")
    g.create_array("state", shape=(0, 3), chunks=(256, 3), dtype="float32", fill_value=0)
    (path / "episodes/000002").mkdir()  # torn: no zarr.json
    with store.begin(EpisodeInfo(task="push", layout=LAYOUT)) as w:
        w.abort()  # aborted before its first step
    store.write(_episode(3, 1))
    raw = EpisodeStore(path, mode="r")
    assert [len(ep) for ep in raw] == [2, 0, 0, 0, 3]
    assert [raw.info(i).status for i in (1, 2, 3)] == ["aborted"] * 3
    assert [len(ep) for ep in open_demos(path, key="data.demos")] == [2, 3]


def test_sources_keep_only_those_episodes(tmp_path):
    path = _store(tmp_path / "s", (2,))
    EpisodeStore(path).write(_episode(4, 1, source="online"))
    EpisodeStore(path).write(_episode(5, 2, source="intervention"))
    demos = open_demos(path, key="train.episode_store", sources=["online", "intervention"])
    assert [len(ep) for ep in demos] == [4, 5]
    with pytest.raises(DemoError, match=r"holds no episode with a step from eval"):
        open_demos(path, key="train.episode_store", sources=["eval"]).episodes()


def test_a_bad_path_names_the_key_the_path_and_the_kinds_it_looked_for(tmp_path):
    with pytest.raises(ConfigError) as e:
        open_demos(tmp_path / "nope", key="data.demos")
    assert str(e.value) == (
        f"key 'data.demos': no demos at {tmp_path / 'nope'}: none of episode_store (zarr.json), "
        "lerobot (meta/info.json); record demos with 'rlinf collect ENV --out DIR'"
    )
    zarr.open_group(str(tmp_path / "other"), mode="w").create_group("x")  # zarr, not episodes
    with pytest.raises(DemoError, match=r"key 'train.demos': .* is not an episode store"):
        list(open_demos(tmp_path / "other", key="train.demos"))


def test_an_empty_store_is_refused_only_when_episodes_are_required(tmp_path):
    path = tmp_path / "empty"
    EpisodeStore(path)
    assert list(open_demos(path, key="train.demos")) == []  # RLPD's demo load takes it as 0
    with pytest.raises(DemoError) as e:
        open_demos(path, key="data.demos").episodes()
    assert str(e.value).startswith(
        f"key 'data.demos': the episode_store at {path} holds no episode with a step; record"
    )


def test_a_missing_feature_is_named_with_what_the_episode_has(tmp_path):
    path = _store(tmp_path / "s", instruction="")
    with pytest.raises(DemoError) as e:
        list(open_demos(path, key="sft.demos", need=["images/front"], hint="use the env's camera"))
    assert str(e.value) == (
        f"key 'sft.demos': episode 0 of {path} has no 'images/front' (it has ['action', "
        "'images/wrist', 'intervention', 'policy_version', 'reward', 'state', 'terminated', "
        "'timestamp', 'truncated', 'camera']); use the env's camera"
    )
    with pytest.raises(DemoError, match=r"key 'sft.demos': episode 0 of .* no 'instruction'"):
        open_demos(path, key="sft.demos", need=["images/wrist", "instruction"]).episodes()
    lerobot = export_lerobot(EpisodeStore(path, mode="r"), tmp_path / "lerobot")
    with pytest.raises(DemoError, match=r"key 'data.store': episode 0 of .* no 'final'"):
        open_demos(lerobot, key="data.store", need=["final"]).episodes()
