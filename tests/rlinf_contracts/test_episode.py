"""Episode schema: fields, validation errors that name the field, attribute round trip."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts.episode import Episode, EpisodeError, EpisodeInfo, Step, StepLayout
from rlinf_contracts.spec import RobotSpec, SpecError


def test_layout_from_spec_and_fields() -> None:
    spec = RobotSpec.raw(5, 4, cameras={"third": (64, 48)})
    layout = StepLayout.from_spec(spec)
    f = layout.fields()
    assert f["state"] == ("float32", (5,)) and f["images/third"] == ("uint8", (64, 48, 3))
    assert f["policy_version"] == ("int64", ()) and f["timestamp"] == ("float64", ())
    assert set(layout.observation_fields()) == {"state", "images/third"}


def test_step_arrays_use_schema_dtypes() -> None:
    a = Step(
        state=np.zeros(2, np.float32), action=np.zeros(1, np.float32), reward=1, terminated=1
    ).arrays()
    assert (
        a["reward"].dtype == np.float32
        and a["terminated"].dtype == bool
        and a["policy_version"].dtype == np.int64
    )


def test_errors_name_the_field() -> None:
    layout = StepLayout(2, 1)
    with pytest.raises(EpisodeError, match="'action'"):
        layout.check({**Step(np.zeros(2, np.float32), np.zeros(1, np.float64)).arrays()})
    with pytest.raises(EpisodeError, match="missing \\['state'\\]"):
        layout.check(
            {
                k: v
                for k, v in Step(np.zeros(2, np.float32), np.zeros(1, np.float32)).arrays().items()
                if k != "state"
            }
        )
    with pytest.raises(EpisodeError, match="status"):
        EpisodeInfo(task="t", layout=layout, status="done")
    with pytest.raises(EpisodeError, match="task"):
        EpisodeInfo(task="", layout=layout)
    with pytest.raises(SpecError, match="unknown robot spec field"):
        EpisodeInfo(task="t", layout=layout, robot={"statez": []})
    ep = Episode(
        EpisodeInfo(task="t", layout=layout),
        {
            k: v[None]
            for k, v in Step(np.zeros(2, np.float32), np.zeros(1, np.float32)).arrays().items()
        },
    )
    ep.validate()
    ep.steps["reward"] = np.zeros(2, np.float32)
    with pytest.raises(EpisodeError, match="episode field 'reward'"):
        ep.validate()


def test_info_round_trip_with_robot_spec() -> None:
    spec = RobotSpec.raw(3, 2)
    info = EpisodeInfo(
        task="lift",
        layout=StepLayout.from_spec(spec),
        robot=spec.to_dict(),
        instruction="lift it",
        control_hz=20.0,
        source="intervention",
        success=True,
        status="complete",
        extra={"seed": 3},
    )
    back = EpisodeInfo.from_dict(info.to_dict())
    assert back == info and back.robot_spec() == spec
