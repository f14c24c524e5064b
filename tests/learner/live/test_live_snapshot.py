"""The view model: exact numbers from metrics rows and episode records, console line, PNG frames."""

from __future__ import annotations

import io

import numpy as np
import pytest

from learner.live.config import LiveSection, resolve_token
from learner.live.console import ConsoleTicker, console_line
from learner.live.frames import FrameTap, encode_png
from learner.live.snapshot import EpisodeRecord, FrameView, Snapshot, build_snapshot
from rlinf_contracts.config import ConfigError

ROWS = [
    {"iteration": 3, "time/wall_s": 100.0, "updates": 1000, "ingest/stored": 1500},
    {
        "iteration": 4,
        "time/wall_s": 110.0,
        "updates": 1318,
        "ingest/stored": 1662,
        "env_steps": 1650,
        "episodes": 12,
        "success_rate": 0.42,
        "weight_version": 37,
        "push/pushes": 12,
        "push/failures": 1,
        "ingest/intervention_ratio": 0.125,
        "learner/backlog": 40.0,
        "learner/utd_effective": 1.9,
        "learner/transitions_trained_share": 0.97,
        "reward_judge/fp_rate": 0.03,
        "reward_judge/fn_rate": 0.1,
        "eval/train/success_rate": 0.5,
    },
]


def _episodes() -> list[EpisodeRecord]:
    pattern = [("r0", True), ("r1", False), ("r0", False), ("r0", True), ("r1", True)]
    return [
        EpisodeRecord(robot, i, ok, steps=50, ret=float(ok), interventions=i, policy_version=30 + i)
        for i, (robot, ok) in enumerate(pattern)
    ]


def test_snapshot_from_rows_and_episodes_has_exact_values() -> None:
    frames = [FrameView("r1", "wrist", 64, 48, 9), FrameView("r0", "front", 64, 64, 7)]
    s = build_snapshot(
        ROWS,
        _episodes(),
        frames,
        run="push",
        reward_source="stream",
        utd_ratio=2.0,
        budget_left_s=750.0,
        evals={"train": {"success_rate": 0.8, "episodes": 20}},
        last_n=3,
        recent=2,
    )
    assert (s.iteration, s.wall_s, s.env_steps, s.updates, s.episodes) == (4, 110.0, 1650, 1318, 12)
    assert s.success_rate == 0.42 and s.success_last_n == pytest.approx(2 / 3)
    assert s.ingest_rate == pytest.approx(16.2) and s.learner_rate == pytest.approx(15.9)
    assert (s.backlog, s.utd_effective, s.trained_share) == (40.0, 1.9, 0.97)
    assert (s.policy_version, s.pushes, s.push_failures) == (37, 12, 1)
    assert (s.intervention_ratio, s.fp_rate, s.fn_rate) == (0.125, 0.03, 0.1)
    assert s.evals == {"train/success_rate": 0.8, "train/episodes": 20.0}  # the final eval wins
    assert [(e.robot_id, e.episode) for e in s.recent] == [("r1", 4), ("r0", 3)]  # newest first
    assert [(r.robot_id, r.episodes, r.successes, r.success_rate) for r in s.robots] == [
        ("r0", 3, 2, pytest.approx(2 / 3)),
        ("r1", 2, 1, 0.5),
    ]
    assert [(f.robot_id, f.camera) for f in s.frames] == [("r0", "front"), ("r1", "wrist")]
    assert Snapshot.from_dict(s.to_dict()) == s
    assert console_line(s) == (
        "robot 12 ep, success 0.42 (last 3: 0.67) | v37 pushed 12 | ingest 16.2/s learner "
        "15.9/s backlog 40 | reward stream fp 0.03 fn 0.10 | budget 12:30 left"
    )


def test_snapshot_before_any_row_is_unknown_not_zero() -> None:
    s = build_snapshot([], [], run="fresh", reward_source="goal_distance")
    assert (s.iteration, s.success_rate, s.success_last_n, s.backlog, s.pushes) == (
        -1,
        None,
        None,
        None,
        None,
    )
    assert s.ingest_rate is None and s.learner_rate is None and s.fp_rate is None
    assert console_line(s) == (
        "robot 0 ep, success - (last 10: -) | v0 | ingest -/s learner -/s backlog - | "
        "reward goal_distance"
    )
    one = build_snapshot(ROWS[:1], [], run="x")  # one row: no rate yet, no clock ran backwards
    assert one.ingest_rate is None and one.iteration == 3


def test_console_ticker_prints_only_changes_and_not_too_often() -> None:
    lines: list[str] = []
    clock = [0.0]
    ticker = ConsoleTicker(lines.append, every_s=5.0, now=lambda: clock[0])
    s = build_snapshot(ROWS, _episodes(), run="r", budget_left_s=100.0)
    assert ticker.offer(s)
    changed = Snapshot(**{**s.__dict__, "episodes": 13})
    clock[0] = 2.0
    assert not ticker.offer(changed)  # too soon after the last line
    clock[0] = 10.0
    assert not ticker.offer(Snapshot(**{**s.__dict__, "budget_left_s": 90.0}))  # clock only
    assert ticker.offer(changed)
    assert not ticker.offer(changed)  # nothing new
    assert ticker.offer(Snapshot(**{**changed.__dict__, "finished": True}), force=True)
    assert lines == [console_line(s), console_line(changed), lines[2]] and lines[2].endswith(
        "finished"
    )


def test_png_frames_decode_to_the_same_pixels() -> None:
    from PIL import Image

    rgb = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    for image in (rgb, rgb[:, :, 0], rgb.astype(np.float32) / 255.0):
        back = np.asarray(Image.open(io.BytesIO(encode_png(image))))
        want = rgb if image.ndim == 3 else rgb[:, :, 0]
        assert np.array_equal(back, want)
    with pytest.raises(ValueError, match="HxW"):
        encode_png(np.zeros((2, 2, 2), np.uint8))
    tap = FrameTap()
    tap.offer("r0", {"front": rgb}, seq=1)
    first = tap.png("r0", "front")
    assert first is tap.png("r0", "front")  # encoded once per frame
    tap.offer("r0", {"front": rgb[::-1]}, seq=2)
    assert tap.png("r0", "front") != first


def test_config_checks_and_token_rules(tmp_path, monkeypatch) -> None:
    with pytest.raises(ConfigError, match="live.port"):
        LiveSection(port=70000).validate()
    with pytest.raises(ConfigError, match="live.token_file"):
        LiveSection(token_file=str(tmp_path / "missing")).validate()
    assert LiveSection().host == "127.0.0.1"  # loopback unless asked
    own, ingest = tmp_path / "live.token", tmp_path / "ingest.token"
    own.write_text("view-secret\n")
    ingest.write_text(" ingest-secret ")
    monkeypatch.delenv("RLINF_INGEST_TOKEN_FILE", raising=False)
    monkeypatch.setenv("RLINF_INGEST_TOKEN", "env-secret")
    assert resolve_token(str(own), str(ingest)) == "view-secret"
    assert resolve_token(None, str(ingest)) == "ingest-secret"
    assert resolve_token(None, None) == "env-secret"
    monkeypatch.delenv("RLINF_INGEST_TOKEN")
    with pytest.raises(ConfigError, match="live.token_file"):
        resolve_token(None, None)
