"""A success classifier trained in a test (the tiny store: bright front frames = success) and the
reward node's section that asks it, shared by the tests that serve it with ``rlinf serve``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests/learner/runners"))


def train_tiny_classifier(tmp: Path) -> Path:
    """The small CNN of ``configs/reward_classifier_push.yaml`` on the tiny store alone (its
    store in ``tmp/demos``); its run directory."""
    from test_reward_classifier_push import write_tiny_store

    from learner.runners.reward_classifier import RewardClassifierConfig, run
    from rlinf_contracts.config import from_dict, load_config

    write_tiny_store(tmp / "demos")
    overrides = [f"data.store={tmp / 'demos'}", f"train.out_dir={tmp / 'run'}", "train.epochs=15"]
    overrides += ["train.batch_size=16", "train.time_budget_s=600", "model.channels=[8,8]"]
    overrides += ["model.backbone=", "data.extra_stores=[]"]  # the small CNN, the demos alone
    cfg = from_dict(
        RewardClassifierConfig, load_config(ROOT / "configs/reward_classifier_push.yaml", overrides)
    )
    assert run(cfg, None)["val_accuracy"] > 0.8
    return tmp / "run"


def reward_section(port: int, **over: Any) -> dict[str, Any]:
    """The reward node on the front camera, asking the classifier served on ``port``, ending
    episodes (the task node resets), a judge on ``task/reward`` reported per 6 frames."""
    return {
        "enabled": True,
        "server_url": f"ws://127.0.0.1:{port}",
        "image_topic": "camera/front/image_raw",
        "camera": "front",
        "consecutive": 2,
        "rate_hz": 20,
        "end_episode": True,
        "begin_episode": False,
        "judge_topic": "task/reward",
        "judge_window": 6,
        **over,
    }
