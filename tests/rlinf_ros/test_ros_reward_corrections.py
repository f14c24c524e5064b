"""The operator's verdict on the classifier's successes (``reward.confirm``), end to end: a
classifier trained here (bright front frames = success) served by a real ``rlinf serve``; the
reward node with ``confirm: judge`` asks the judge topic (the twin's operator) at each success.
A judge that says no turns the success into a failure end (reason ``operator``, reward 0) and its
frames into a negative episode of the corrections store; a judge that says yes lets it stand and
keeps a positive one. The classifier retrained with those corrections is pushed to the running
server (``push.url``), which then serves the new version. Conditions are polled, never timed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from classifier_rig import ROOT, RewardRig, train_tiny_classifier

from rlinf_contracts.config import ConfigError
from rlinf_ros.online_config import RewardNodeConfig
from rlinf_ros.reward_corrections import CorrectionStore

TOKEN = "corrections-weights-token"


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"confirm": "jugde"}, r"reward.confirm.*did you mean 'judge'"),
        ({"confirm": "judge", "judge_topic": ""}, r"judge_topic' is empty"),
        ({"confirm": "judge", "end_episode": False}, r"needs reward.source=classifier"),
        ({"catch_missed": 5}, r"catch_missed.*set reward.confirm"),
        ({"confirm": "judge", "on_reject": "contine"}, r"on_reject.*did you mean 'continue'"),
        ({"confirm": "judge", "catch_missed": -1}, r"catch_missed' is a frame count"),
    ],
)
def test_confirm_config_errors_name_the_key(overrides: dict, match: str) -> None:
    base = {"end_episode": True, "judge_topic": "task/reward"}
    cfg = RewardNodeConfig(**{**base, **overrides})
    with pytest.raises(ConfigError, match=match):
        cfg.validate()


def test_corrections_read_back_as_labelled_frames(tmp_path: Path) -> None:
    from learner.runners.reward_classifier import labelled_frames

    store = CorrectionStore(tmp_path / "corr", "front", state_dim=5)
    frames = [np.full((8, 8, 3), v, np.uint8) for v in (10, 20, 30)]
    store.write(frames, "rejected", "judge")
    store.write(frames, "confirmed", "judge")
    data = labelled_frames(str(tmp_path / "corr"), "front", last_k=3)
    # the rejected success: three negatives; the confirmed one: three positives
    assert data["label"].tolist() == [0.0] * 3 + [1.0] * 3
    assert data["images"].shape == (6, 8, 8, 3) and data["state"].shape == (6, 5)
    assert data["episode"].tolist() == [0, 0, 0, 1, 1, 1]


@pytest.mark.ros
def test_operator_rejects_and_confirms_and_the_retrained_classifier_is_pushed(
    classifier: Path, tmp_path: Path, ros_domain_id: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    from ros_procs import free_port

    from rlinf_data.store import EpisodeStore

    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN", TOKEN)
    corrections = tmp_path / "corrections"
    with RewardRig(classifier, tmp_path, confirm="judge", corrections_dir=str(corrections)) as rig:
        rewards, reports, ends, port = rig.rewards, rig.reports, rig.ends, rig.port
        rig.show(30, 0.0, lambda: len(rewards) >= 3, "dark frames scored")
        # a success the judge does not see: rejected, a failure end, no reward 1
        rig.show(230, 0.0, lambda: len(ends()) >= 1, "the operator's end")
        first = ends()[0]
        assert (first["reason"], first["success"], first["status"]) == (
            "operator",
            False,
            "truncated",
        )
        assert not any(v == 1.0 for _, v in rewards)
        # the scene changes (dark frames), then a success the judge sees: confirmed
        n = len(rewards)
        rig.show(30, 0.0, lambda: any(v == 0.0 for _, v in rewards[n:]), "dark frames again")
        rig.show(230, 1.0, lambda: len(ends()) >= 2, "the confirmed end")
        second = ends()[1]
        assert (second["reason"], second["success"]) == ("classifier", True)
        assert any(v == 1.0 for _, v in rewards)
        # the counts ride in the judge's window reports (a window after the confirmation)
        rig.show(230, 1.0, lambda: any(r.get("operator_confirmed") for _, r in reports), "report")
        rep = next(r for _, r in reports if r.get("operator_confirmed"))
        assert rep["operator_rejected"] == 1 and rep["operator_confirmed"] == 1
        store = EpisodeStore(corrections, mode="r")
        labels = [store.info(i).success for i in range(len(store))]
        assert labels[:2] == [False, True] and all(store.length(i) == 2 for i in range(2))

        # the classifier retrained with the corrections, pushed to the server serving it
        from learner.runners.reward_classifier import RewardClassifierConfig, run
        from rlinf_cli.wiring import plug_in
        from rlinf_contracts.config import from_dict, load_config

        plug_in()  # the weight-push client, as `rlinf train` plugs it in
        overrides = [
            f"data.store={classifier.parent / 'demos'}",
            f"data.extra_stores=[{corrections}]",
            f"train.out_dir={tmp_path / 'retrained'}",
            "train.epochs=2",
            "train.batch_size=16",
            "model.channels=[8,8]",
            "model.backbone=",
            f"push.url=ws://127.0.0.1:{port}",
            "push.timeout_s=20",
        ]
        cfg = from_dict(
            RewardClassifierConfig,
            load_config(ROOT / "configs/reward_classifier_push.yaml", overrides),
        )
        metrics = run(cfg, None)
        # the server started on the checkpoint's weights (version 1); the push is serving next
        assert metrics["pushed"] == {f"ws://127.0.0.1:{port}": 2}
        # a push to a port where nothing listens: one clear error naming the saved checkpoint
        cfg.push.url = f"ws://127.0.0.1:{free_port()}"
        cfg.train.out_dir = str(tmp_path / "retrained2")
        cfg.push.timeout_s = 2.0
        with pytest.raises(ConnectionError, match=r"trained and saved .*push to ws://"):
            run(cfg, None)
    assert rig.codes["reward"] == 0


@pytest.mark.ros
def test_not_yet_goes_on_until_the_operator_sees_the_success(
    classifier: Path, tmp_path: Path, ros_domain_id: int
) -> None:
    """``on_reject: continue``: a rejected success is reward 0 and no end; the classifier still
    saying yes is not asked again, and once the judge sees the success the operator's key ends
    the episode in success."""
    pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    over = {"confirm": "judge", "on_reject": "continue", "catch_missed": 3}
    with RewardRig(classifier, tmp_path, **over) as rig:
        rewards, reports, ends = rig.rewards, rig.reports, rig.ends
        rig.show(30, 0.0, lambda: len(rewards) >= 3, "dark frames scored")
        # bright frames the judge calls no: one rejection, then silence while they last
        rig.show(230, 0.0, lambda: any(r.get("operator_rejected") for _, r in reports), "report")
        assert not ends() and not any(v == 1.0 for _, v in rewards)
        # the same bright scene, now a success to the judge: the operator's key ends it
        rig.show(230, 1.0, lambda: len(ends()) >= 1, "the operator's success key")
        assert (ends()[0]["reason"], ends()[0]["success"]) == ("operator", True)
        assert any(v == 1.0 for _, v in rewards)
        rig.show(230, 1.0, lambda: any(r.get("operator_caught") for _, r in reports), "counts")
        rep = next(r for _, r in reversed(reports) if r.get("operator_caught"))
        assert (rep["operator_rejected"], rep["operator_caught"]) == (1, 1)
    assert rig.codes["reward"] == 0


@pytest.mark.ros
def test_operator_catches_the_success_the_classifier_misses(
    classifier: Path, tmp_path: Path, ros_domain_id: int
) -> None:
    """Dark frames (the classifier says no) while the judge says yes: after ``catch_missed``
    frames the operator ends the episode in success, once per success, and keeps its frames."""
    pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    from std_msgs.msg import String

    from rlinf_contracts.transitions import EpisodeEvent, event_to_json
    from rlinf_data.store import EpisodeStore

    corrections = tmp_path / "corrections"
    over = {"confirm": "judge", "catch_missed": 4, "corrections_dir": str(corrections)}
    with RewardRig(classifier, tmp_path, **over) as rig:
        rewards, reports, ends = rig.rewards, rig.reports, rig.ends
        rig.show(30, 0.0, lambda: len(rewards) >= 3, "dark frames scored")
        assert not ends()
        rig.show(30, 1.0, lambda: len(ends()) >= 1, "the operator's success key")
        first = ends()[0]
        assert (first["reason"], first["success"]) == ("operator", True)
        assert any(v == 1.0 for _, v in rewards)
        # the same success still on view (the reset not come yet): no second key press
        n = len(rewards)
        rig.show(30, 1.0, lambda: len(rewards) >= n + 12, "the same scene scored")
        assert len(ends()) == 1
        # the scene reset (the judge says no), then a new missed success: caught again
        rig.show(30, 0.0, lambda: len(rewards) >= n + 16, "the reset scene scored")
        rig.show(30, 1.0, lambda: len(ends()) >= 2, "the second key press")
        rig.show(30, 1.0, lambda: any(r.get("operator_caught") for _, r in reports), "report")
        rep = next(r for _, r in reversed(reports) if r.get("operator_caught"))
        assert rep["operator_rejected"] == 0 and rep["operator_confirmed"] == 0
        # a bench's success key while the classifier is silent and the judge says no: a
        # positive too, by the key
        keys = rig.probe.node.create_publisher(String, "episode/event", 10)
        heard = lambda: keys.get_subscription_count() >= 2  # noqa: E731  # the node and the probe
        rig.probe.wait_for(heard, 30, "the node hears the keys", rig.procs)
        n = len(rewards)
        rig.show(30, 0.0, lambda: len(rewards) >= n + 4, "the reset scene scored")
        key = EpisodeEvent("end", success=True, reason="success", stamp=0.0)
        keys.publish(String(data=event_to_json(key)))
        rig.show(30, 0.0, lambda: kept(corrections) >= 3, "the key's frames kept")
        store = EpisodeStore(corrections, mode="r")
        assert all(store.info(i).success for i in range(3))
        assert [store.info(i).extra["by"] for i in range(3)] == ["judge", "judge", "success"]
        assert store.info(0).extra["correction"] == "caught"
    assert rig.codes["reward"] == 0


def kept(store: Path) -> int:
    """Episodes in the corrections store so far (0 before its first)."""
    from rlinf_data.store import EpisodeStore

    return len(EpisodeStore(store, mode="r")) if (store / "episodes").is_dir() else 0


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_classifier(tmp_path_factory.mktemp("rc"))
