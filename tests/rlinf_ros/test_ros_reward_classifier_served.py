"""The reward node on a classifier trained here (tiny store: bright front frames = success) and
served by a real ``rlinf serve --checkpoint`` subprocess: dark frames give reward 0, bright ones
reward 1 and one episode end, and with a judge topic each window of scored frames comes back as
false-positive / false-negative rates against the judge's flags (here a judge that always says
no: every success frame is a false positive). Conditions are polled, never timed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from classifier_rig import RewardRig, train_tiny_classifier

pytestmark = [pytest.mark.ros]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_classifier(tmp_path_factory.mktemp("rc"))


def test_served_classifier_rewards_frames_and_reports_rates_against_the_judge(
    classifier: Path, tmp_path: Path, ros_domain_id: int
) -> None:
    with RewardRig(classifier, tmp_path) as rig:
        rewards, events, reports = rig.rewards, rig.events, rig.reports

        def show(base: int, until, what: str) -> None:
            rig.show(base, 0.0, until, what)  # the judge: never a success

        show(30, lambda: len(rewards) >= 3, "dark frames scored")
        assert all(v == 0.0 for _, v in rewards)
        n = len(rewards)
        show(230, lambda: any(v == 1.0 for _, v in rewards[n:]), "success reward")
        rig.probe.wait_for(lambda: rig.ends(), 20, "episode end", rig.procs)
        end = rig.ends()[0]
        assert end["success"] and end["reason"] == "classifier"
        assert not any(e["kind"] == "begin" for _, e in events)  # begin_episode: false
        show(230, lambda: len(reports) >= 1, "a judge report")
        # the judge never says yes: no FN rate; FP rate = the window's success frames / 6
        rep = reports[-1][1]
        assert rep["n"] == 6 and rep["judge_neg"] == 6 and rep["judge_pos"] == 0
        assert rep["fn_rate"] is None and rep["fp_rate"] == rep["false_pos"] / 6
        assert any(r["false_pos"] > 0 for _, r in reports)
    assert rig.codes["reward"] == 0
