"""The reward node on a classifier trained here (tiny store: bright front frames = success) and
served by a real ``rlinf serve --checkpoint`` subprocess: dark frames give reward 0, bright ones
reward 1 and one episode end, and with a judge topic each window of scored frames comes back as
false-positive / false-negative rates against the judge's flags (here a judge that always says
no: every success frame is a false positive). Conditions are polled, never timed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from classifier_rig import reward_section, train_tiny_classifier
from ros_procs import Probe, Procs, free_port

pytestmark = [pytest.mark.ros]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_classifier(tmp_path_factory.mktemp("rc"))


def test_served_classifier_rewards_frames_and_reports_rates_against_the_judge(
    classifier: Path, tmp_path: Path, ros_domain_id: int
) -> None:
    from sensor_msgs.msg import Image
    from std_msgs.msg import Float64, String

    from rlinf_ros.conversions import numpy_to_image

    port = free_port()
    graph = tmp_path / "graph.yaml"
    reward = reward_section(port)
    graph.write_text(yaml.safe_dump({"robot": {"enabled": False}, "reward": reward}))
    procs, probe = Procs(tmp_path), None
    try:
        procs.start(
            "serve",
            ["-m", "rlinf_cli.main", "serve", "--checkpoint", str(classifier), "--port", str(port)],
        )
        procs.start_node("reward", graph)
        probe = Probe()
        rewards = probe.record(Float64, "reward", lambda m: m.data)
        events = probe.record(String, "episode/event", lambda m: json.loads(m.data))
        reports = probe.record(String, "reward/judge", lambda m: json.loads(m.data))
        img = probe.node.create_publisher(Image, "camera/front/image_raw", 10)
        judge = probe.node.create_publisher(Float64, "task/reward", 10)
        probe.wait_for(lambda: img.get_subscription_count() > 0, 60, "reward node up", procs)
        probe.wait_for(lambda: judge.get_subscription_count() > 0, 30, "judge matched", procs)
        rng = np.random.default_rng(1)

        def show(base: int, until, what: str) -> None:
            deadline = time.monotonic() + 120
            while not until() and time.monotonic() < deadline:
                judge.publish(Float64(data=0.0))  # the judge: never a success
                frame = (base + rng.integers(0, 20, (48, 48, 3))).astype(np.uint8)
                img.publish(numpy_to_image(frame, "rgb8"))
                time.sleep(0.05)
            probe.wait_for(until, 5, what, procs)

        show(30, lambda: len(rewards) >= 3, "dark frames scored")
        assert all(v == 0.0 for _, v in rewards)
        n = len(rewards)
        show(230, lambda: any(v == 1.0 for _, v in rewards[n:]), "success reward")
        probe.wait_for(lambda: any(e["kind"] == "end" for _, e in events), 20, "episode end")
        end = next(e for _, e in events if e["kind"] == "end")
        assert end["success"] and end["reason"] == "classifier"
        assert not any(e["kind"] == "begin" for _, e in events)  # begin_episode: false
        show(230, lambda: len(reports) >= 1, "a judge report")
        # the judge never says yes: no FN rate; FP rate = the window's success frames / 6
        rep = reports[-1][1]
        assert rep["n"] == 6 and rep["judge_neg"] == 6 and rep["judge_pos"] == 0
        assert rep["fn_rate"] is None and rep["fp_rate"] == rep["false_pos"] / 6
        assert any(r["false_pos"] > 0 for _, r in reports)
    finally:
        if probe is not None:
            probe.close()
        codes = procs.stop_all()
    assert codes["reward"] == 0
