"""``rlinf ros up CONFIG --only NODE ...``: unknown names are a one-line mistake (exit 2), and
``key=value`` words after ``--only`` stay overrides. Nothing here starts a ROS process."""

from __future__ import annotations

import pytest

from rlinf_cli.main import main

CFG = "configs/ros_sim_franka.yaml"  # nodes: robot, policy_client, task


@pytest.fixture
def started(monkeypatch):
    """Records what ``up`` would start instead of starting it."""
    calls: list[dict] = []

    def fake_up(config_path, overrides=None, only=None, duration_s=None):
        calls.append({"config": config_path, "overrides": list(overrides or []), "only": only})
        return 0

    monkeypatch.setattr("rlinf_ros.graph.up", fake_up)
    return calls


def test_an_unknown_only_name_is_one_line_and_exit_2(started, capsys):
    assert main(["ros", "up", CFG, "--only", "bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "--only" in err and "'bogus'" in err and "robot, policy_client, task" in err, err
    assert started == []


@pytest.mark.parametrize(
    "argv, only, overrides",
    [
        (
            ["--only", "robot", "policy_client.control_hz=5"],
            ["robot"],
            ["policy_client.control_hz=5"],
        ),
        (
            ["--only", "robot", "policy_client.control_hz=5", "task"],
            ["robot", "task"],
            ["policy_client.control_hz=5"],
        ),
        (
            ["policy_client.control_hz=5", "--only", "task"],
            ["task"],
            ["policy_client.control_hz=5"],
        ),
    ],
)
def test_overrides_after_only_are_applied(started, argv, only, overrides):
    assert main(["ros", "up", CFG, *argv]) == 0
    assert started == [{"config": CFG, "overrides": overrides, "only": only}]


def test_an_override_after_only_is_still_validated(started, capsys):
    assert main(["ros", "up", CFG, "--only", "robot", "policy_client.server_url=http://x"]) == 2
    assert "policy_client.server_url" in capsys.readouterr().err
    assert started == []
