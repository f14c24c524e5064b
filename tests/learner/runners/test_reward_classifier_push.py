"""configs/reward_classifier_push.yaml trains from a demo store's labelled front-camera frames by
one command (here ``rlinf train`` on a tiny store in seconds): the last frames of a successful
episode are the positives, its checkpoint is served as ``[p_success]``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]


def write_tiny_store(path: Path, episodes: int = 8, steps: int = 10, size: int = 16) -> None:
    """Episodes of dark frames; a successful episode's last frames (and final) are bright:
    the classifier's positives under ``last_k`` (the push config's camera ``front``)."""
    from rlinf_contracts.episode import EpisodeInfo, StepLayout
    from rlinf_contracts.transitions import StepRecord
    from rlinf_data.store import EpisodeStore

    store = EpisodeStore(str(path), mode="a")
    layout = StepLayout(36, 4, {"front": (size, size), "wrist": (size, size)})
    rng = np.random.default_rng(0)
    for e in range(episodes):
        success = e % 2 == 0
        w = store.begin(EpisodeInfo(task="mujoco_franka/push", layout=layout, source="demo"))

        def frame(bright: bool) -> np.ndarray:
            base = 220 if bright else 30
            return (base + rng.integers(0, 20, (size, size, 3))).astype(np.uint8)

        for i in range(steps):
            bright = success and i >= steps - 2
            rec = StepRecord(
                episode=e,
                state=np.zeros(36, np.float32),
                action=np.zeros(4, np.float32),
                images={"front": frame(bright), "wrist": frame(False)},
            )
            w.append(
                rec.step(1.0 if success and i == steps - 1 else 0.0, success and i == steps - 1)
            )
        final = {
            "state": np.zeros(36, np.float32),
            "images/front": frame(success),
            "images/wrist": frame(False),
        }
        w.end(status="complete" if success else "truncated", success=success, final=final)


def test_push_classifier_trains_from_the_demo_store_by_one_command(tmp_path: Path) -> None:
    store, out = tmp_path / "demos", tmp_path / "rc"
    write_tiny_store(store)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_cli.main",
            "train",
            "configs/reward_classifier_push.yaml",
            f"data.store={store}",
            f"train.out_dir={out}",
            "train.epochs=15",
            "train.batch_size=16",
            "train.time_budget_s=600",
            "model.channels=[8,8]",
            "model.hidden=16",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    from learner.metrics import read_metrics

    final = read_metrics(out)["final"]
    # labels: the last 3 observations (2 steps + the final one) of each of the 4 successes
    assert final["positives"] == 4 * 3
    # margin 4 frames left out of each successful episode: 8 x 11 frames - 4 x 4
    assert final["frames"] == 8 * 11 - 4 * 4
    assert final["val_accuracy"] > 0.8, final
    assert (Path(final["checkpoint"]) / "meta.json").exists()
