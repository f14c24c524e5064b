"""The learned reward of the camera-only push loop without ROS: the classifier's error rates
against a judge (exact values on a known sequence), the human's keys deciding before the
classifier, the reports riding to the learner's metrics, and the graph config: cameras only, no
object pose, and a server for another layout refuses it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlinf_contracts.transitions import EpisodeEvent, StepRecord
from rlinf_ros.reward_sources import EpisodeVerdict, JudgeWindow, SuccessLatch, judge_rates

ROOT = Path(__file__).resolve().parents[2]


def test_fp_fn_rates_against_a_known_judge_sequence() -> None:
    judge = [0, 0, 0, 0, 0, 1, 1, 1, 0, 0]
    clf = [0, 1, 0, 0, 0, 0, 1, 1, 1, 1]
    r = judge_rates([bool(c) for c in clf], [bool(j) for j in judge])
    assert (r.n, r.judge_pos, r.judge_neg, r.false_pos, r.false_neg) == (10, 3, 7, 3, 1)
    assert r.fp_rate == 3 / 7 and r.fn_rate == 1 / 3
    # a judge that never says yes: no FN rate (not 0)
    assert judge_rates([True], [False]).fn_rate is None
    with pytest.raises(ValueError):
        judge_rates([True], [])


def test_judge_window_reports_once_per_window() -> None:
    w = JudgeWindow(size=4)
    pairs = [(True, True), (True, False), (False, False), (False, True)] * 2 + [(True, True)]
    reports = [r for c, j in pairs if (r := w.add(c, j)) is not None]
    assert len(reports) == 2 and w.windows == 2
    assert all(r.fp_rate == 0.5 and r.fn_rate == 0.5 and r.n == 4 for r in reports)


def test_human_keys_decide_before_the_classifier() -> None:
    v = EpisodeVerdict(SuccessLatch(consecutive=2))
    assert v.on_score(True).reward == 0.0  # one success frame: not yet (consecutive 2)
    # the human says failure first: that is the reward, the classifier is silent on this scene
    key = v.on_event(EpisodeEvent("end", status="truncated", reason="failure"))
    assert key is not None and (key.reward, key.success, key.by) == (0.0, False, "failure")
    assert v.on_score(True) is None and v.on_score(True) is None
    # reset (an unsuccessful frame): scoring again; the human's success key wins as well
    assert v.on_score(False).reward == 0.0
    key = v.on_event(EpisodeEvent("end", success=True, reason="success"))
    assert key is not None and key.reward == 1.0
    assert v.on_score(False).reward == 0.0
    # the classifier's own success ends the episode once; its end coming back changes nothing,
    # nor does a key pressed after it (the episode is closed for the recorder / streamer too)
    assert v.on_score(True).end is False
    first = v.on_score(True)
    assert first is not None and first.end and first.reward == 1.0
    assert v.on_event(EpisodeEvent("end", success=True, reason="classifier")) is None
    assert v.on_event(EpisodeEvent("end", status="truncated", reason="failure")) is None
    assert v.on_score(True) is None  # still the same success: no second end
    # the twin's timeout before any success: 0, and a re-record (aborted) publishes nothing
    v.on_score(False)
    assert v.on_event(EpisodeEvent("end", status="truncated", reason="timeout")).reward == 0.0
    v.on_score(False)
    assert v.on_event(EpisodeEvent("end", status="aborted", reason="rerecord")) is None


def test_judge_reports_ride_the_next_episode_info_to_the_learner_metrics() -> None:
    from learner.offpolicy.reward_judge import JudgeReports
    from rlinf_contracts.episode import StepLayout
    from rlinf_ros.recording import EpisodeAssembler, EpisodeTemplate

    infos = []

    class Sink:
        def begin(self, episode, info):
            infos.append(info.to_dict())

        def step(self, *a):
            pass

        def end(self, *a):
            pass

    asm = EpisodeAssembler(EpisodeTemplate("t", StepLayout(1, 1)), Sink())

    def rec(e: int) -> StepRecord:
        return StepRecord(episode=e, state=np.zeros(1), action=np.zeros(1))

    asm.on_record(rec(0))
    report = {**judge_rates([True, False], [False, False]).to_dict(), "window": 1}
    asm.annotations["reward_judge"] = report
    asm.on_record(rec(1))
    assert "reward_judge" not in infos[0]["extra"] and infos[1]["extra"]["reward_judge"] == report
    reports = JudgeReports()
    assert reports.metrics() == {}  # no judge (a real bench): no reward_judge metrics at all
    for info in infos:
        reports.add("twin0", info["extra"].get("reward_judge"))
    assert reports.metrics() == {
        "reward_judge/windows": 1.0,
        "reward_judge/fp_rate": 0.5,
        "reward_judge/total_fp_rate": 0.5,
    }


def test_pixel_graph_config_names_cameras_and_reads_no_object_pose() -> None:
    pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    from rlinf_contracts.features import needs
    from rlinf_ros.config import load_graph_config
    from rlinf_ros.graph import node_commands

    path = ROOT / "configs/ros_sim_franka_push_pixels.yaml"
    cfg = load_graph_config(path, ["streamer.enabled=true"])
    kinds = [c.kind for c in node_commands(cfg, str(path))]
    assert kinds == ["robot", "policy_client", "task", "streamer", "reward"]
    spec = cfg.policy_client.spec()
    assert spec.camera_sizes() == {"front": (64, 64), "wrist": (64, 64)}
    assert not any(needs(spec, k) for k in ("object_pos", "objects", "goal_pos"))
    assert set(cfg.policy_client.cameras) == set(cfg.robot.scene.cameras) == {"front", "wrist"}
    assert not cfg.task.judge_ends_episodes and cfg.reward.source == "classifier"
    assert cfg.reward.judge_topic == cfg.task.reward_topic
    assert cfg.reward.image_topic == cfg.robot.scene.cameras[cfg.reward.camera]
    # frames faster than the control tick: at the control rate each frame's age when acted on is
    # left to the two timers' phase (up to a whole period), which brought real-time passes down
    assert cfg.robot.scene.camera_hz >= 2 * cfg.policy_client.rate_hz


def test_a_server_for_another_layout_refuses_the_camera_only_robot() -> None:
    from policy_server.background import ServerThread
    from policy_server.client import PolicyClient, SpecRefused
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer
    from rlinf_contracts.config import load_config
    from rlinf_contracts.spec import RobotSpec

    pixels = RobotSpec.from_dict(
        load_config(ROOT / "configs/ros_sim_franka_push_pixels.yaml")["policy_client"]["robot_spec"]
    )
    state = RobotSpec.from_dict(
        load_config(ROOT / "configs/ros_sim_franka_push.yaml")["policy_client"]["robot_spec"]
    )

    class Zero:
        def __init__(self, spec: RobotSpec) -> None:
            self.robot_spec = spec

        def infer(self, obs: dict) -> dict:
            return {"actions": np.zeros((len(obs["state"]), 1, 4), np.float32)}

    for served, robot in ((state, pixels), (pixels, state)):
        with ServerThread(PolicyServer(Zero(served), ServerConfig(host="127.0.0.1", port=0))) as s:
            with pytest.raises(SpecRefused, match="cameras differ"):
                PolicyClient(s.url, robot_spec=robot, retries=0)
    with ServerThread(PolicyServer(Zero(pixels), ServerConfig(host="127.0.0.1", port=0))) as s:
        with PolicyClient(s.url, robot_spec=pixels) as ok:  # the same spec is admitted
            assert RobotSpec.from_dict(ok.metadata.robot_spec).camera_sizes() == {
                "front": (64, 64),
                "wrist": (64, 64),
            }
