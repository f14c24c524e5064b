"""Reward node over real DDS: a served success classifier (a numpy stand-in here, served by the
real policy server: the robot PC needs no torch) scores camera frames; episode events (sim twin
success flag, human keys) become rewards too. The trained torch classifier is served the same
way in tests/learner/runners/test_reward_classifier.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import Probe, Procs

from rlinf_contracts.spec import RobotSpec

pytestmark = [pytest.mark.ros]


class BrightnessClassifier:
    """p_success = mean brightness: a bright frame is a "success", a dark one a failure."""

    robot_spec = RobotSpec.raw(1, 1, 1, {"cam": (32, 32)}, False)

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        p = np.asarray(obs["images"]["cam"], np.float32).mean(axis=(1, 2, 3)) / 255.0
        return {"actions": p[:, None, None]}


def _graph(tmp_path: Path, reward: dict) -> Path:
    path = tmp_path / "graph.yaml"
    path.write_text(
        yaml.safe_dump({"robot": {"enabled": False}, "reward": {"enabled": True, **reward}})
    )
    return path


def test_reward_node_classifier_success_and_failure_frames(
    tmp_path: Path, ros_domain_id: int
) -> None:
    from sensor_msgs.msg import Image
    from std_msgs.msg import Bool, Float64, String

    from policy_server.background import ServerThread
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer
    from rlinf_ros.conversions import numpy_to_image

    procs, probe = Procs(tmp_path), None
    with ServerThread(
        PolicyServer(BrightnessClassifier(), ServerConfig(host="127.0.0.1", port=0))
    ) as srv:
        try:
            procs.start_node(
                "reward",
                _graph(
                    tmp_path,
                    {
                        "server_url": srv.url,
                        "image_topic": "cam/image",
                        "consecutive": 2,
                        "rate_hz": 20,
                        "end_episode": True,
                    },
                ),
            )
            probe = Probe()
            p = probe.record(Float64, "reward/p_success", lambda m: m.data)
            reward = probe.record(Float64, "reward", lambda m: m.data)
            success = probe.record(Bool, "reward/success", lambda m: m.data)
            events = probe.record(String, "episode/event", lambda m: json.loads(m.data))
            pub = probe.node.create_publisher(Image, "cam/image", 10)
            probe.wait_for(lambda: pub.get_subscription_count() > 0, 30, "reward node up", procs)

            def show(value: int, n: int) -> None:
                for _ in range(n):  # a 64x48 frame: the node resizes to the served 32x32
                    pub.publish(numpy_to_image(np.full((48, 64, 3), value, np.uint8)))
                    time.sleep(0.08)

            # Failure frames until three are scored: under load the node's image subscription can
            # match the probe's publisher after the first frames went out, so one burst may be lost.
            deadline = time.monotonic() + 60
            while len(p) < 3 and time.monotonic() < deadline:
                show(20, 2)
            probe.wait_for(lambda: len(p) >= 3, 10, "failure frames scored", procs)
            assert all(v < 0.5 for _, v in p) and all(v == 0.0 for _, v in reward)
            assert not any(v for _, v in success)
            n = len(reward)
            # success frames until the node says success (2 scored in a row): polled, not a fixed
            # burst, since a loaded node may score only some of the frames; the episode ends once
            deadline = time.monotonic() + 60
            while not any(v == 1.0 for _, v in reward[n:]) and time.monotonic() < deadline:
                show(240, 2)
            probe.wait_for(
                lambda: any(v == 1.0 for _, v in reward[n:]), 10, "success reward", procs
            )
            assert max(v for _, v in p) > 0.9
            probe.wait_for(
                lambda: any(e["kind"] == "end" and e["success"] for _, e in events),
                15,
                "episode end",
            )
            assert sum(e["kind"] == "end" for _, e in events) == 1
        finally:
            if probe is not None:
                probe.close()
            codes = procs.stop_all()
    assert codes["reward"] == 0


def test_reward_node_events_source_twin_flag_and_human_keys(
    tmp_path: Path, ros_domain_id: int
) -> None:
    from std_msgs.msg import Float64, String

    from rlinf_contracts.transitions import EpisodeEvent, event_to_json

    procs, probe = Procs(tmp_path), None
    try:
        procs.start_node("reward", _graph(tmp_path, {"source": "events"}))
        probe = Probe()
        reward = probe.record(Float64, "reward", lambda m: m.data)
        pub = probe.node.create_publisher(String, "episode/event", 10)
        probe.wait_for(lambda: pub.get_subscription_count() > 0, 30, "reward node up", procs)
        # Our publisher seeing the node does not mean both DDS matches are done (the node's
        # subscription to us, our subscription to its reward): under load the first events can
        # be lost. Send success events until one reward comes back, then the checked sequence.
        deadline = time.monotonic() + 60
        while not reward and time.monotonic() < deadline:
            pub.publish(
                String(data=event_to_json(EpisodeEvent("end", success=True, reason="success")))
            )
            time.sleep(0.3)
        probe.wait_for(lambda: len(reward) >= 1, 10, "the first reward", procs)
        # Warm-up rewards still in flight are all 1.0: a failure marks where the checked sequence
        # starts, and everything is waited for by count, not by a sleep (one reliable publisher:
        # in order, none lost once matched).
        for ev in (
            EpisodeEvent("end", status="truncated", reason="failure"),  # marker: 0.0
            EpisodeEvent("end", success=True, reason="success"),  # twin / key y
            EpisodeEvent("begin"),  # no reward
            EpisodeEvent("end", status="truncated", reason="failure"),  # key n
        ):
            pub.publish(String(data=event_to_json(ev)))
        probe.wait_for(
            lambda: sum(v == 0.0 for _, v in reward) >= 2, 30, "the checked rewards", procs
        )
        values = [v for _, v in reward]
        k = values.index(0.0)
        assert all(v == 1.0 for v in values[:k]), values  # the warm-up
        assert values[k:] == [0.0, 1.0, 0.0], values
    finally:
        if probe is not None:
            probe.close()
        codes = procs.stop_all()
    assert codes["reward"] == 0
