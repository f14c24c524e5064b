"""The learner's side of the online loop without processes: robot transitions -> replay segments,
taken-over runs, and the checks that refuse a bad ``ingest:`` / ``push:`` section before start."""

from __future__ import annotations

import numpy as np
import pytest

from learner.offpolicy.learner import intervention_parts
from learner.offpolicy.remote import Segments
from rlinf_contracts.config import ConfigError, from_dict
from rlinf_contracts.episode import StepLayout
from rlinf_data.ingest import IngestedTransition


def _t(
    seq: int,
    episode: int,
    robot: str = "r0",
    last: bool = False,
    terminated: bool = False,
    intervention: bool = False,
    success: bool | None = None,
    dim: int = 3,
) -> IngestedTransition:
    obs = {"state": np.full(dim, seq, np.float32), "images": {}}
    nxt = {"state": np.full(dim, seq + 1, np.float32), "images": {}}
    return IngestedTransition(
        robot,
        seq,
        "online",
        obs,
        np.zeros(2, np.float32),
        float(terminated),
        terminated,
        False,
        intervention,
        0,
        nxt,
        episode,
        last or terminated,
        success,
    )


def _segments() -> Segments:
    return Segments(StepLayout(3, 2), "toy/point_reach", None, 10.0)


def test_segments_close_on_end_on_a_hole_and_per_robot() -> None:
    seg = _segments()
    out = []
    for t in (
        _t(0, 0),
        _t(1, 0, robot="r1"),
        _t(1, 0),
        _t(2, 0, robot="r1"),
        _t(2, 0, terminated=True),
    ):
        out += seg.add(t)
    assert len(out) == 1 and out[0].info.extra["robot_id"] == "r0"  # r1's episode is still running
    ep = out[0]
    assert (
        ep.steps["state"][:, 0].tolist() == [0, 1, 2]
        and ep.info.success
        and ep.info.status == "complete"
    )
    assert ep.final["state"][0] == 3  # the next observation of the last step
    # a hole in r1's seqs (feed items dropped) cuts its segment: the part before bootstraps from its
    # final obs
    cut = seg.add(_t(5, 0, robot="r1"))
    assert (
        len(cut) == 1
        and cut[0].steps["state"][:, 0].tolist() == [1, 2]
        and cut[0].info.status == "aborted"
    )
    # a new episode of the same robot closes the old one; an end with a success flag is a success
    assert [len(e) for e in seg.add(_t(7, 1, robot="r1"))] == [1]
    done = seg.add(_t(8, 1, robot="r1", last=True, success=True))
    assert len(done) == 1 and done[0].info.success and len(done[0]) == 2


def test_a_step_of_another_shape_is_refused_not_stored() -> None:
    seg = _segments()
    assert seg.add(_t(0, 0, dim=5, terminated=True)) == [] and seg.rejected == 1


def test_intervention_parts_are_the_taken_over_runs() -> None:
    seg = _segments()
    flags = [False, True, True, False, True]
    eps = []
    for i, f in enumerate(flags):
        eps += seg.add(_t(i, 0, intervention=f, terminated=i == len(flags) - 1))
    parts = intervention_parts(eps[0])
    assert [p.steps["state"][:, 0].tolist() for p in parts] == [[1, 2], [4]]
    assert parts[0].final["state"][0] == 3  # bootstraps from the step the human handed back at
    assert parts[1].steps["terminated"][-1]


def _cfg(**sections: dict):
    from learner.offpolicy.config import OffPolicyConfig

    base = {"env": {"name": "toy/point_reach"}, "algorithm": {"name": "sac"}}
    return from_dict(OffPolicyConfig, {**base, **sections})


def test_config_errors_name_the_key(monkeypatch, tmp_path) -> None:
    for k in (
        "RLINF_INGEST_TOKEN",
        "RLINF_INGEST_TOKEN_FILE",
        "RLINF_WEIGHTS_TOKEN",
        "RLINF_WEIGHTS_TOKEN_FILE",
    ):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(ConfigError, match="ingest.token_file"):
        _cfg(ingest={"enabled": True})
    monkeypatch.setenv("RLINF_INGEST_TOKEN", "t")
    with pytest.raises(ConfigError, match="push.token_file"):
        _cfg(ingest={"enabled": True}, push={"url": "ws://127.0.0.1:8000"})
    with pytest.raises(ConfigError, match="push.url"):
        _cfg(
            ingest={"enabled": True}, push={"url": "http://127.0.0.1:8000", "token_file": __file__}
        )
    with pytest.raises(ConfigError, match="push.url"):
        _cfg(
            push={"url": "ws://127.0.0.1:8000", "token_file": __file__}
        )  # a sim run has no policy server
    with pytest.raises(ConfigError, match="push.every_updates"):
        _cfg(
            ingest={"enabled": True},
            push={"url": "ws://h:1", "every_updates": 0, "token_file": __file__},
        )
    with pytest.raises(ConfigError, match="ingest.token_file"):
        _cfg(ingest={"enabled": True, "token_file": str(tmp_path / "missing")})
    cfg = _cfg(ingest={"enabled": True}, push={"url": "ws://h:1", "token_file": __file__})
    assert cfg.ingest.enabled and cfg.push.every_updates == 50
    # a weights token the policy server would refuse (< 8 characters) stops the learner before it
    # trains
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN", "short7c")
    with pytest.raises(ConfigError, match=r"push.token_file.*RLINF_WEIGHTS_TOKEN.*shorter than 8"):
        _cfg(ingest={"enabled": True}, push={"url": "ws://h:1"})
    short = tmp_path / "token"
    short.write_text("  abc \n")
    with pytest.raises(ConfigError, match=r"push.token_file.*shorter than 8"):
        _cfg(ingest={"enabled": True}, push={"url": "ws://h:1", "token_file": str(short)})
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN", "long-enough")
    assert _cfg(ingest={"enabled": True}, push={"url": "ws://h:1"}).push.token_file is None


def test_goal_distance_reward_is_the_simulators_reach_reward() -> None:
    from learner.offpolicy.remote import REWARDS
    from rlinf_contracts.spec import RobotSpec

    spec = RobotSpec.from_dict(
        {
            "state": [["ee_pos", 3], ["goal_minus_ee", 3]],
            "action": {"control": "ee_delta", "dim": 7},
        }
    )
    seg = Segments(StepLayout(6, 2), "t", None, 10.0)
    eps = []
    for i in range(3):
        t = _t(i, 0, terminated=i == 2, dim=6)
        t.obs["state"][3:] = [0.0, 0.3 - 0.1 * i, 0.0]  # the goal comes 10 cm closer per step
        t.next_obs["state"][3:] = [0.0, 0.2 - 0.1 * i, 0.0]
        eps += seg.add(t)
    r = REWARDS.get("goal_distance")(spec)(eps[0])
    # -distance after each step; the last step (terminal, success) keeps the robot's +1
    assert np.allclose(r, [-0.2, -0.1, 1.0 - 0.0], atol=1e-6), r
    assert np.array_equal(REWARDS.get("stream")(spec)(eps[0]), eps[0].steps["reward"])
    with pytest.raises(ConfigError, match="goal_minus_ee"):
        REWARDS.get("goal_distance")(
            RobotSpec.from_dict(
                {"state": [["ee_pos", 3]], "action": {"control": "ee_delta", "dim": 7}}
            )
        )
