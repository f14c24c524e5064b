"""``rlinf collect``: what the store holds afterwards is what the command reports.

From a simulator task (the oracle with noise) and from a ROS 2 graph (the teleop twin of
``configs/ros_collect_teleop.yaml``: kinematic arm, scripted human, task node as the judge,
real node processes over DDS); with ``--only-success`` failed episodes are gone from the store and
the report says how many were discarded.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest

from rlinf_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
REPORT = re.compile(
    r"collect: (\d+) episodes kept in \S+ \((\d+) successful\); discarded (\d+) failed"
)
ROS_REPORT = re.compile(REPORT.pattern + r", (\d+) interrupted")


def _report(caplog: pytest.LogCaptureFixture, pattern: re.Pattern = REPORT) -> tuple[int, ...]:
    found = [m for r in caplog.records if (m := pattern.search(r.getMessage()))]
    assert found, [r.getMessage() for r in caplog.records][-10:]
    return tuple(int(g) for g in found[-1].groups())


def _episodes(path: Path) -> list:
    from rlinf_data.store import EpisodeStore

    return list(EpisodeStore(path, mode="r")) if path.exists() else []


@pytest.mark.sim
@pytest.mark.parametrize(
    "bad, says",
    [
        (["--obs-mode", "rbg"], "obs_mode='rbg'; use one of"),
        (["max_episode_step=10"], "unknown mujoco_franka option(s) ['max_episode_step']"),
        (["--obs-mode", "rgb", "cameras=[front,wirst]"], "unknown camera 'wirst'"),
    ],
)
def test_sim_collect_env_option_typo_is_one_line(
    bad: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["collect", "mujoco_franka/push", "--episodes", "1", "--out", str(tmp_path / "d")]
    assert main([*argv, *bad]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "env 'mujoco_franka/push'" in err and says in err, err
    assert not (tmp_path / "d").exists()  # refused before a store was opened


@pytest.mark.sim
def test_sim_collect_only_success_keeps_only_successes_and_reports_the_discarded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    out = tmp_path / "demos"
    # noise 2 (the maximum) with seed 0: the oracle fails some reaches, deterministically
    rc = main(
        [
            "collect",
            "mujoco_franka/reach",
            "--episodes",
            "2",
            "--noise",
            "2.0",
            "--only-success",
            "--max-attempts",
            "10",
            "--seed",
            "0",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    kept, successes, discarded = _report(caplog)
    episodes = _episodes(out)
    assert kept == successes == len(episodes) == 2
    assert all(ep.info.success for ep in episodes), [ep.info.success for ep in episodes]
    assert discarded >= 1  # the run really met failures, and they are gone from the store
    found = re.search(r"\((\d+) attempts", caplog.text)
    assert found, caplog.text[-2000:]
    attempts = int(found.group(1))
    assert attempts == kept + discarded


def _ros_args(out: Path, *extra: str) -> list[str]:
    # a kinematic arm (no physics) and the scripted human that drives to each goal
    return [
        "collect",
        str(ROOT / "configs/ros_collect_teleop.yaml"),
        "--out",
        str(out),
        *extra,
        "robot.arms.0.backend=kinematic",
        "teleop.device=scripted",
    ]


@pytest.mark.ros
def test_ros_collect_stores_the_episodes_it_reports(
    tmp_path: Path, ros_domain_id: int, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    caplog.set_level(logging.INFO)
    out = tmp_path / "demos"
    assert main(_ros_args(out, "--episodes", "2")) == 0
    kept, successes, failed, interrupted = _report(caplog, ROS_REPORT)
    episodes = _episodes(out)
    assert kept == len(episodes) >= 2 and failed == 0
    assert successes == sum(bool(ep.info.success) for ep in episodes)
    for ep in episodes:  # whole demonstrations: closed, labelled, every step the human's
        assert ep.info.status in ("complete", "truncated") and ep.info.source == "demo"
        assert len(ep) > 0 and ep.steps["intervention"].all()


@pytest.mark.ros
def test_ros_collect_only_success_discards_this_runs_failures_only(
    tmp_path: Path, ros_domain_id: int, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    from rlinf_contracts.episode import EpisodeInfo, Step, StepLayout
    from rlinf_data.store import EpisodeStore

    caplog.set_level(logging.INFO)
    out = tmp_path / "demos"
    with EpisodeStore(out).begin(
        EpisodeInfo(task="earlier", layout=StepLayout(2, 1, {}), source="demo")
    ) as w:
        w.append(
            Step(
                state=np.zeros(2, np.float32),
                action=np.zeros(1, np.float32),
                reward=0.0,
                terminated=False,
                truncated=True,
            )
        )
        w.end(success=False)  # an earlier failure: not this collection's to discard
    # two control steps to within 1 mm of the goal: no reach succeeds, every episode of this run
    # fails
    rc = main(
        _ros_args(
            out,
            "--episodes",
            "1",
            "--only-success",
            "--max-attempts",
            "2",
            "task.max_steps=2",
            "task.success_radius=0.001",
        )
    )
    assert rc == 1  # not enough successes within the attempts
    kept, successes, failed, interrupted = _report(caplog, ROS_REPORT)
    assert (kept, successes) == (
        0,
        0,
    ) and failed >= 2  # every finished attempt failed and was discarded
    assert [ep.info.task for ep in _episodes(out)] == ["earlier"]


@pytest.mark.ros
def test_ros_collect_summary_store_recorder_and_judge_agree(
    tmp_path: Path,
    ros_domain_id: int,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture,
) -> None:
    """One episode count: the summary, the store, the recorder's status (the bar's source) and
    the task node's verdicts name the same episodes with the same success flags."""
    pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    import json

    caplog.set_level(logging.INFO)
    out = tmp_path / "demos"
    # a short reach (20 steps): some episodes of the scripted human succeed, some may time out
    assert main(_ros_args(out, "--episodes", "3", "task.max_steps=20")) == 0
    kept, successes, failed, interrupted = _report(caplog, ROS_REPORT)
    episodes = _episodes(out)
    flags = [bool(ep.info.success) for ep in episodes]
    assert kept == len(episodes) >= 3 and successes == sum(flags) and failed == 0
    status = json.loads((tmp_path / ".demos.collect.json").read_text())
    assert (status["written"], status["successes"]) == (kept, successes), status
    assert status["failures"] == kept - successes and status["aborted"] == 0, status
    logs = capfd.readouterr()
    text = logs.out + logs.err
    recorded = re.findall(r"recorder: (\d+) episodes written \((\d+) successful", text)
    assert recorded and tuple(map(int, recorded[-1])) == (kept, successes), recorded
    judged = re.findall(r"episode \d+ judged (success|timeout|aborted)", text)
    verdicts = [v == "success" for v in judged if v != "aborted"]
    # the judge may have ended one more episode that was still being written at the stop
    assert verdicts[: len(flags)] == flags and len(verdicts) - len(flags) in (0, 1), judged
