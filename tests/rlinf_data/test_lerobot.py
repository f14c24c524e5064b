"""LeRobot v3.0 round trip: export -> LeRobot's own ``LeRobotDataset`` reader -> import.

The reader is lerobot 0.4.4, installed ``--no-deps`` by scripts/bootstrap.sh's dev block into its
own directory ``.venv/lerobot-reader`` (with datasets and torchvision), and run in a subprocess
with that directory on its path: a torchvision whose C ops cannot load breaks
``import transformers`` for every other test in the same venv. Its
default video decoder, torchcodec, and torchvision's C ops are published on PyPI only as CUDA
builds (they need libc10_cuda / libtorch_cuda / libnvrtc); next to our CPU torch they cannot
load. Where torchcodec loads (a CUDA torch), the test decodes with it. Elsewhere the reader's
frame decoder alone (``decode_video_frames``, which LeRobot calls with the episode's shifted
timestamps) is replaced by a PyAV one with the same contract; everything else (info / episodes /
tasks / stats parsing, the frame table, episode -> video file and timestamp arithmetic) is
LeRobot's. torchvision's Python part is made importable by declaring the two op schemas its
meta registrations expect when its C ops are missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlinf_contracts.episode import Episode, EpisodeInfo, StepLayout
from rlinf_contracts.spec import RobotSpec
from rlinf_data.lerobot import export_lerobot, import_lerobot
from rlinf_data.store import EpisodeStore

ROOT = Path(__file__).resolve().parents[2]
READER = ROOT / ".venv" / "lerobot-reader"
LAYOUT = StepLayout(state_dim=3, action_dim=2, cameras={"third": (24, 32), "wrist": (16, 16)})


def make_episode(n: int, seed: int, terminated: bool, instruction: str) -> Episode:
    rng = np.random.default_rng(seed)
    steps = {
        "state": rng.normal(size=(n, 3)).astype(np.float32),
        "action": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
        "reward": rng.normal(size=n).astype(np.float32),
        "terminated": np.zeros(n, bool),
        "truncated": np.zeros(n, bool),
        "intervention": rng.random(n) < 0.3,
        "policy_version": np.arange(n, dtype=np.int64) + seed,
        "timestamp": np.cumsum(rng.random(n)),
    }
    steps["terminated" if terminated else "truncated"][-1] = True
    final = {"state": rng.normal(size=3).astype(np.float32)}
    for cam, (h, w) in LAYOUT.cameras.items():
        steps[f"images/{cam}"] = rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
        final[f"images/{cam}"] = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    info = EpisodeInfo(
        task="push",
        layout=LAYOUT,
        robot=RobotSpec.raw(3, 2).to_dict(),
        instruction=instruction,
        control_hz=10.0,
        source="demo",
        success=terminated,
        status="complete" if terminated else "truncated",
    )
    return Episode(info, steps, final)


def test_export_is_read_by_lerobot_and_imports_back_identically(
    tmp_path: Path, monkeypatch
) -> None:
    store = EpisodeStore(tmp_path / "store")
    originals = [
        make_episode(7, 1, True, "push the cube"),
        make_episode(5, 2, False, "push the cube"),
        make_episode(6, 3, True, "push it left"),
    ]
    for ep in originals:
        store.write(ep)
    root = export_lerobot(EpisodeStore(tmp_path / "store", mode="r"), tmp_path / "lerobot")
    assert json.loads((root / "meta/info.json").read_text())["codebase_version"] == "v3.0"

    if not READER.is_dir():
        pytest.skip(
            f"LeRobot's reader is not installed in {READER} (scripts/bootstrap.sh, dev extras)"
        )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(READER), str(ROOT)])}
    run = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("lerobot_reader_check.py")),
            str(root),
            str(tmp_path / "store"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "frames match" in run.stdout

    back = import_lerobot(root)
    assert len(back) == 3
    for a, b in zip(originals, back):
        assert b.info.to_dict() == {**a.info.to_dict(), "status": a.info.status}
        assert a.steps.keys() == b.steps.keys() and a.final.keys() == b.final.keys()
        for k in a.steps:
            assert (
                np.array_equal(a.steps[k], b.steps[k]) and a.steps[k].dtype == b.steps[k].dtype
            ), k
        for k in a.final:
            assert np.array_equal(a.final[k], b.final[k]), k
