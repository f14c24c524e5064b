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


class RewardRig:
    """``rlinf serve`` of ``classifier`` on a free port (:attr:`port`) and the reward node of
    :func:`reward_section` (``over``: its changed keys) asking it, as real processes, with a probe
    recording ``reward``, ``episode/event`` and ``reward/judge`` and publishing front frames and
    the judge's flag (``with RewardRig(...) as rig``; the exit codes in :attr:`codes` after)."""

    def __init__(self, classifier: Path, tmp: Path, **over: Any) -> None:
        from ros_procs import free_port

        self.classifier, self.port, self.tmp = classifier, free_port(), tmp
        self.reward = reward_section(self.port, **over)
        self.codes: dict[str, int] = {}
        self.probe: Any = None

    def __enter__(self) -> RewardRig:
        import json

        import numpy as np
        import yaml
        from ros_procs import Probe, Procs
        from sensor_msgs.msg import Image
        from std_msgs.msg import Float64, String

        graph = self.tmp / "graph.yaml"
        graph.write_text(yaml.safe_dump({"robot": {"enabled": False}, "reward": self.reward}))
        self.procs = procs = Procs(self.tmp)
        try:  # a failed start stops what did start
            serve = ["-m", "rlinf_cli.main", "serve", "--checkpoint", str(self.classifier)]
            procs.start("serve", [*serve, "--port", str(self.port)])
            procs.start_node("reward", graph)
            self.probe = probe = Probe()
            self.rewards = probe.record(Float64, "reward", lambda m: m.data)
            self.events = probe.record(String, "episode/event", lambda m: json.loads(m.data))
            self.reports = probe.record(String, "reward/judge", lambda m: json.loads(m.data))
            self.img = probe.node.create_publisher(Image, "camera/front/image_raw", 10)
            self.judge = probe.node.create_publisher(Float64, "task/reward", 10)
            probe.wait_for(lambda: self.img.get_subscription_count() > 0, 60, "node up", procs)
            probe.wait_for(lambda: self.judge.get_subscription_count() > 0, 30, "judge", procs)
        except BaseException:
            self.__exit__()
            raise
        self._rng, self._np, self._float64 = np.random.default_rng(1), np, Float64
        return self

    def show(self, base: int, says: float, until: Any, what: str) -> None:
        """Frames of brightness ``base`` (+ noise) and the judge's ``says`` at 20 Hz until
        ``until()`` holds (polled; a 120 s guard, then a clear failure naming ``what``)."""
        import time

        from rlinf_ros.conversions import numpy_to_image

        deadline = time.monotonic() + 120
        while not until() and time.monotonic() < deadline:
            self.judge.publish(self._float64(data=says))
            frame = (base + self._rng.integers(0, 20, (48, 48, 3))).astype(self._np.uint8)
            self.img.publish(numpy_to_image(frame, "rgb8"))
            time.sleep(0.05)
        self.probe.wait_for(until, 5, what, self.procs)

    def ends(self) -> list[dict[str, Any]]:
        return [e for _, e in self.events if e["kind"] == "end"]

    def __exit__(self, *exc: object) -> None:
        if self.probe is not None:
            self.probe.close()
        self.codes = self.procs.stop_all()
