"""Every runner's demos come through the one reader (``rlinf_data.demos``): each takes a LeRobot
dataset as it takes an episode store, skips torn episodes, and names a missing feature."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learner.offline.data import read_episodes
from learner.offpolicy.learner import load_demos
from learner.runners.reward_classifier import labelled_frames
from learner.runners.vla_sft import load_demos as sft_demos
from rlinf_contracts.config import ConfigError
from rlinf_contracts.episode import Episode, EpisodeInfo, Step, StepLayout
from rlinf_data.lerobot import export_lerobot
from rlinf_data.replay import ReplayBuffer, ReplayConfig
from rlinf_data.store import EpisodeStore

LAYOUT = StepLayout(state_dim=3, action_dim=2, cameras={"wrist": (16, 16)})


def _episode(n: int, seed: int, instruction: str = "push the cube") -> Episode:
    rng = np.random.default_rng(seed)
    one = Step(np.zeros(3, np.float32), np.zeros(2, np.float32)).arrays()
    steps = {k: np.repeat(v[None], n, 0) for k, v in one.items()}
    steps["state"] = rng.normal(size=(n, 3)).astype(np.float32)
    steps["action"] = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    steps["images/wrist"] = rng.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8)
    steps["terminated"][-1] = True
    final = {"state": np.zeros(3, np.float32), "images/wrist": np.zeros((16, 16, 3), np.uint8)}
    info = EpisodeInfo(
        task="push", layout=LAYOUT, instruction=instruction, status="complete", success=True
    )
    return Episode(info, steps, final)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    """An episode store with a torn episode between two good ones, and its LeRobot export."""
    root = tmp_path_factory.mktemp("demos")
    store = EpisodeStore(root / "store")
    store.write(_episode(2, 0))
    (root / "store/episodes/000001").mkdir()  # torn by a kill: no zarr.json
    store.write(_episode(3, 1))
    lerobot = export_lerobot(EpisodeStore(root / "store", mode="r"), root / "lerobot")
    return {"store": root / "store", "lerobot": lerobot}


@pytest.mark.parametrize("kind", ["store", "lerobot"])
def test_every_runner_reads_both_kinds_and_skips_torn_episodes(sources, kind):
    path = str(sources[kind])
    assert [len(ep) for ep in read_episodes(path)] == [2, 3]  # offline BC / IQL / DAgger
    replay = ReplayBuffer(LAYOUT, ReplayConfig(capacity=100, mix={"demo": 1.0}))
    assert load_demos(replay, path, LAYOUT) == 5  # RLPD's demo source
    frames = labelled_frames(path, "", last_k=1)  # reward classifier: steps + final observations
    assert frames["camera"] == "wrist" and frames["episode"].tolist() == [0, 0, 0, 1, 1, 1, 1]
    data = sft_demos(path, "wrist", chunk=2)  # VLA SFT
    assert data.chunks.shape == (5, 2, 2) and set(data.instructions) == {"push the cube"}


def test_runner_errors_name_their_key_and_the_missing_feature(sources, tmp_path):
    with pytest.raises(ConfigError, match=r"key 'sft.demos': episode 0 of .* no 'images/front'"):
        sft_demos(str(sources["store"]), "front", chunk=2)
    with pytest.raises(ConfigError, match=r"key 'data.store': episode 0 of .* no 'images/front'"):
        labelled_frames(str(sources["lerobot"]), "front", last_k=1)
    EpisodeStore(tmp_path / "plain").write(_episode(2, 0, instruction=""))
    with pytest.raises(ConfigError, match=r"key 'sft.demos': .* no 'instruction'.*instruction"):
        sft_demos(str(tmp_path / "plain"), "wrist", chunk=2)
    with pytest.raises(ConfigError, match=r"key 'data.demos': no demos at"):
        read_episodes(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"key 'train.demos': no demos at"):
        load_demos(ReplayBuffer(LAYOUT, ReplayConfig(capacity=10)), str(tmp_path / "nope"), LAYOUT)
