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
        ({"corrections_dir": "runs/x"}, r"corrections_dir.*set reward.confirm"),
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
    store.write(frames, False, "judge")
    store.write(frames, True, "judge")
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


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_classifier(tmp_path_factory.mktemp("rc"))
