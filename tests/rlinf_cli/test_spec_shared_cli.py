"""``rlinf spec --shared``: each robot's spec to share one learner, from shipped graph configs,
and one line with exit code 2 when there is none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from rlinf_cli.main import main
from rlinf_contracts.episode import StepLayout
from rlinf_contracts.spec import RobotSpec
from rlinf_ros.config import load_graph_config

ROOT = Path(__file__).resolve().parents[2]
PUSH = "configs/ros_sim_franka_push.yaml"  # object + goal features, no camera
LANGUAGE = "configs/ros_sim_franka_language.yaml"  # three object slots and a front camera
CAMERA = "configs/ros_sim_franka_camera.yaml"  # joint-delta actions


@pytest.fixture(autouse=True)
def _in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_two_graph_configs_get_their_specs_restricted_to_the_shared_fields(capsys) -> None:
    assert main(["spec", "--shared", PUSH, LANGUAGE]) == 0
    out = capsys.readouterr().out
    docs = list(yaml.safe_load_all(out))
    assert len(docs) == 2
    specs = [RobotSpec.from_dict(d["robot_spec"]) for d in docs]
    common = ["ee_pos", "ee_rot6d", "joint_pos", "joint_vel", "gripper_width"]
    for spec, config in zip(specs, (PUSH, LANGUAGE)):
        own = load_graph_config(config).policy_client.spec()
        assert [f.name for f in spec.state] == common and spec.cameras == ()
        # per-robot placement and the action are the robot's own, unchanged
        assert (spec.task, spec.base_position, spec.home) == (own.task, own.base_position, own.home)
        assert spec.action == own.action and spec.control_hz == own.control_hz
    assert StepLayout.from_spec(specs[0]) == StepLayout.from_spec(specs[1]) == StepLayout(24, 4)
    lines = out.splitlines()
    assert lines[0].startswith("# shared by 2 robots: state[24] = ee_pos(3)")
    assert (
        f"# dropped from {PUSH}: state object_pos(3) object_minus_ee(3) goal_pos(3) "
        "goal_minus_object(3)"
    ) in lines
    assert (
        f"# dropped from {LANGUAGE}: state obj0_minus_ee(3) obj1_minus_ee(3) obj2_minus_ee(3); "
        "camera front(64x64)"
    ) in lines
    assert "  state: [[ee_pos, 3], [ee_rot6d, 6], [joint_pos, 7], [joint_vel, 7], " in out


def test_robots_without_a_shared_spec_get_one_line_and_exit_code_2(capsys) -> None:
    assert main(["spec", "--shared", PUSH, CAMERA]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"robots {PUSH} and {CAMERA} have different action spaces" in err
    assert "separate per-robot action heads are not built" in err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["spec", "--shared", PUSH], "at least two robots"),
        (["spec", "--shared", PUSH, PUSH], "listed more than once"),
        (["spec", "mujoco_franka/reach", "--shared", PUSH, LANGUAGE], "not both"),
        (["spec"], "give an env name or checkpoint, or --shared"),
        (["spec", "--shared", "configs/ros_sim_franka_push.yml", LANGUAGE], "no such graph YAML"),
    ],
)
def test_misuse_of_shared_is_one_line(argv: list[str], says: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


def test_the_learner_env_takes_the_printed_state_fields_and_gets_the_robots_layout(
    capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``--shared`` prints for the learner (``env.kwargs.state_fields``), given to the run
    config of the push twin, makes its env -- hence its network, ingest layout and eval --
    present exactly the layout each robot's restricted spec streams, and its state values are
    the twin's own for those fields."""
    pytest.importorskip("mujoco", reason="needs the sim extra")
    from learner.offpolicy.collect import layout_of
    from learner.rollout.envs import build_env
    from rlinf_cli.train import typed_config
    from rlinf_contracts.spec import SpecError

    monkeypatch.setenv("RLINF_INGEST_TOKEN", "ingest-secret")  # the run config's checks
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN", "weights-secret")
    assert main(["spec", "--shared", PUSH, LANGUAGE]) == 0
    out = capsys.readouterr().out
    learner_line = next(line for line in out.splitlines() if line.startswith("# learner: "))
    override = learner_line.removeprefix("# learner: ")
    robots = [RobotSpec.from_dict(d["robot_spec"]) for d in yaml.safe_load_all(out) if d]
    _, cfg = typed_config("configs/ros_online_rlpd_push.yaml", [override, "env.num_envs=2"])
    env = build_env(cfg.env.name, cfg.env.num_envs, **cfg.env.factory_kwargs())
    full = build_env(cfg.env.name, 2, **{**cfg.env.factory_kwargs(), "state_fields": None})
    try:
        assert [StepLayout.from_spec(r) for r in robots] == [layout_of(env.spec)] * 2
        obs, whole = env.reset(seed=3), full.reset(seed=3)
        np.testing.assert_array_equal(obs["state"], whole["state"][:, :24])  # the robot part
        action = np.zeros((2, env.spec.action_dim), np.float32)
        for _ in range(env.spec.max_episode_steps + 1):  # through an auto-reset
            nxt, _, term, trunc, info = env.step(action)
            if (term | trunc).any():
                assert info["final_observation"]["state"].shape == (2, 24)
                break
        else:
            raise AssertionError("no episode ended")
        assert nxt["state"].shape == (2, 24)
    finally:
        env.close()
        full.close()
    with pytest.raises(SpecError, match="unknown: \\['bogus'\\]"):
        build_env(cfg.env.name, 1, **{**cfg.env.factory_kwargs(), "state_fields": ["bogus"]})
