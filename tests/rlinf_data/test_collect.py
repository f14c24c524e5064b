"""``rlinf collect``: oracle demonstrations land in the episode store; bad input is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlinf_cli.main import main
from rlinf_data.store import EpisodeStore


@pytest.mark.sim
def test_collect_push_demos(tmp_path: Path) -> None:
    out = tmp_path / "push"
    assert (
        main(
            [
                "collect",
                "mujoco_franka/push",
                "--episodes",
                "2",
                "--out",
                str(out),
                "--noise",
                "0.1",
                "--only-success",
            ]
        )
        == 0
    )
    store = EpisodeStore(out, mode="r")
    assert len(store) == 2
    for i in range(2):
        info, ep = store.info(i), store.read(i)
        assert (info.source, info.status, info.success, info.task) == (
            "demo",
            "complete",
            True,
            "mujoco_franka/push",
        )
        assert (
            info.robot_spec() is not None
            and info.robot_spec().state_dim == ep.steps["state"].shape[1]
        )
        assert ep.steps["terminated"][-1] and not ep.steps["terminated"][:-1].any()
        assert ep.final is not None and np.abs(ep.steps["action"]).max() <= 1.0
    # appending to the same store continues the numbering
    assert (
        main(["collect", "mujoco_franka/push", "--episodes", "1", "--out", str(out), "--seed", "1"])
        == 0
    )
    assert len(EpisodeStore(out, mode="r")) == 3


def test_collect_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["collect", "maniskill/PushCube-v1", "--out", str(tmp_path / "x")]) == 2
    assert "no scripted source for env family 'maniskill'" in capsys.readouterr().err
    assert (
        main(["collect", "mujoco_franka/push", "--episodes", "0", "--out", str(tmp_path / "x")])
        == 2
    )
    assert "--episodes must be >= 1" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["collect", "mujoco_franka/push", "--out", str(tmp_path / "file")]) == 2
    assert "is not a directory" in capsys.readouterr().err
