"""Teleop devices without hardware: gamepad (pygame, SDL dummy driver, a fake stick), leader arm,
the mapping into each action space, the HG-DAgger drift trigger, and who drives a tick."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlinf_contracts.spec import RobotSpec
from rlinf_contracts.transitions import TeleopCommand
from rlinf_ros.robot_io import SpecIO
from rlinf_ros.takeover import HumanTakeover
from rlinf_ros.teleop import TeleopInput, to_action
from rlinf_ros.teleop.leader import LeaderArm
from rlinf_ros.teleop.scripted import ScriptedReach
from robot_drivers.types import PANDA_HOME


class FakeStick:
    def __init__(self) -> None:
        self.axes, self.buttons = [0.5, 0.0, 0.0, -1.0], [0] * 8

    def get_numaxes(self) -> int:
        return 4

    def get_axis(self, i: int) -> float:
        return self.axes[i]

    def get_numbuttons(self) -> int:
        return 8

    def get_button(self, i: int) -> int:
        return self.buttons[i]

    def get_numhats(self) -> int:
        return 0


def test_gamepad_maps_sticks_buttons_and_events(monkeypatch) -> None:
    pytest.importorskip("pygame")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    from rlinf_ros.teleop.gamepad import LB, RB, Gamepad

    stick = FakeStick()
    pad = Gamepad(joystick=stick)
    inp = pad.read()
    assert (
        inp.twist.tolist() == [0.0, -0.5, 1.0, 0.0, 0.0, 0.0]
        and not inp.intervention
        and inp.events == []
    )
    stick.buttons[LB] = stick.buttons[RB] = stick.buttons[0] = 1
    inp = pad.read()
    assert inp.intervention and inp.gripper == -1.0 and inp.events == ["success"]
    assert pad.read().events == []  # an event fires once per press
    pad.close()


def test_leader_and_joint_action_spaces() -> None:
    leader = LeaderArm()
    assert leader.read().joints is None
    q = np.asarray(PANDA_HOME)
    leader.on_joints(q, 0.08)
    leader.read()
    leader.on_joints(q + 0.01, 0.0)
    inp = leader.read()
    assert inp.intervention and inp.gripper == -1.0
    pos = RobotSpec.from_dict(
        {"state": [["joint_pos", 7]], "action": {"control": "joint_position", "dim": 8}}
    )
    delta = RobotSpec.from_dict(
        {
            "state": [["joint_pos", 7]],
            "action": {"control": "joint_delta", "dim": 8, "joint_scale": 0.05},
        }
    )
    assert np.all(np.abs(to_action(inp, pos)) <= 1)
    assert np.allclose(to_action(inp, delta, q_now=q)[:7], 0.2)
    with pytest.raises(ValueError, match="q_now"):
        to_action(inp, delta)


def test_scripted_human_takes_over_when_the_policy_drifts() -> None:
    t = [0.0]
    s = ScriptedReach(
        always=False, patience_s=1.0, progress_m=0.02, release_m=0.02, clock=lambda: t[0]
    )
    s.on_goal(np.array([0.5, 0.0, 0.3]))
    s.on_pose(np.array([0.3, 0.0, 0.3]))
    assert not s.read().intervention
    t[0] = 1.5  # no progress for 1.5 s: take over
    assert s.read().intervention
    s.on_pose(np.array([0.49, 0.0, 0.3]))  # close enough: hand back
    assert not s.read().intervention


def test_scripted_human_takes_over_at_once_when_the_hand_heads_away() -> None:
    t = [0.0]
    s = ScriptedReach(
        always=False,
        patience_s=10.0,
        progress_m=0.02,
        release_m=0.02,
        regress_m=0.03,
        clock=lambda: t[0],
    )
    s.on_goal(np.array([0.5, 0.0, 0.3]))
    s.on_pose(np.array([0.3, 0.0, 0.3]))  # 0.20 m away
    assert not s.read().intervention
    t[0] = 0.1
    s.on_pose(np.array([0.38, 0.0, 0.3]))  # closer: 0.12 m
    assert not s.read().intervention
    s.on_pose(np.array([0.36, 0.0, 0.3]))  # 0.14 m: 2 cm back, within regress_m
    assert not s.read().intervention
    s.on_pose(np.array([0.34, 0.0, 0.3]))  # 0.16 m: 4 cm farther than the closest approach
    inp = s.read()
    assert inp.intervention and inp.twist[0] > 0  # drives toward the goal, long before patience_s
    s.on_pose(np.array([0.49, 0.0, 0.3]))
    assert not s.read().intervention  # back on track: hand back
    s.on_goal(np.array([0.0, 0.3, 0.3]))  # a new episode forgets the closest approach
    s.on_pose(np.array([0.0, 0.0, 0.3]))
    assert not s.read().intervention


def test_takeover_decides_who_drives() -> None:
    spec = RobotSpec.from_dict(
        {"state": [["joint_pos", 7]], "action": {"control": "joint_delta", "dim": 8}}
    )
    h = HumanTakeover(SpecIO(spec), timeout_s=0.3)
    h.on_teleop(TeleopCommand(np.zeros(8), intervention=True).to_json(), now=10.0)
    assert h.active(10.1) is not None and h.active(10.5) is None  # stale after 0.3 s
    h.on_teleop(TeleopCommand(np.zeros(8), intervention=False).to_json(), now=11.0)
    assert h.active(11.0) is None
    with pytest.raises(ValueError, match="action.dim"):
        h.on_teleop(TeleopCommand(np.zeros(3), True).to_json(), now=12.0)
    state = {"arms": {"panda": {"estop": True, "errors": [], "mode": "IDLE"}}}
    assert h.on_robot_state(json.dumps(state)) == "panda: e-stop" and h.blocked
    assert h.on_robot_state(json.dumps(state)) == ""  # reported once per change
    inp = TeleopInput(twist=np.ones(6))
    assert to_action(inp, spec).tolist() == [0.0] * 7 + [
        1.0
    ]  # a twist cannot drive joint deltas: hold


def test_ee_teleop_before_the_first_pose_report_is_missing_input_not_a_crash() -> None:
    """CI once saw the client die: a scripted teleop command arrived before the robot's first
    current_pose, and the Jacobian was built from a None position. It must wait for the pose."""
    from rlinf_contracts.features import MissingInput, RobotReading

    spec = RobotSpec.from_dict(
        {"state": [["joint_pos", 7]], "action": {"control": "ee_delta", "dim": 7}}
    )
    h = HumanTakeover(SpecIO(spec), timeout_s=1.0)
    cmd = TeleopCommand(np.zeros(7), intervention=True)
    no_pose = RobotReading(q=np.asarray(PANDA_HOME, float), dq=np.zeros(7), gripper_width=0.08)
    with pytest.raises(MissingInput, match="current_pose"):
        h.command(cmd, [no_pose])
    assert h.teleop_steps == 0


def test_teleop_device_names_are_checked_before_any_node_starts() -> None:
    """A mistyped device is a config error naming the key (not a ModuleNotFoundError from the
    teleop node after the graph is up), and every name the check accepts builds a real module."""
    import importlib

    import pytest

    from rlinf_contracts.config import ConfigError
    from rlinf_ros.online_config import TELEOP_DEVICES, TeleopNodeConfig

    with pytest.raises(ConfigError, match=r"teleop\.device.*did you mean 'scripted'"):
        TeleopNodeConfig(device="scriptd").validate()
    with pytest.raises(ConfigError, match=r"teleop\.rate_hz"):
        TeleopNodeConfig(device="scripted", rate_hz=0).validate()
    for name in TELEOP_DEVICES:
        TeleopNodeConfig(device=name).validate()
        assert importlib.util.find_spec(f"rlinf_ros.teleop.{name}") is not None, name


def test_a_scripted_human_with_noise_misses_reproducibly_and_bad_settings_are_named() -> None:
    """``teleop.script.noise``: the operator's commands scatter around the oracle's (the near-miss
    episodes a success classifier learns its negatives from), the same scatter for the same
    seed; a setting the script does not have is refused by name, not by a deep TypeError."""
    from types import SimpleNamespace

    from rlinf_ros.teleop.scripted import _make

    def commands(**opts: float) -> np.ndarray:
        s = ScriptedReach(pos_scale=0.05, always=True, clock=lambda: 0.0, **opts)
        s.on_goal(np.array([0.5, 0.0, 0.3]))
        s.on_pose(np.array([0.49, 0.0, 0.3]))
        return np.array([s.read().twist[:3] for _ in range(200)])

    clean, noisy = commands(), commands(noise=0.5, seed=3)
    assert np.allclose(clean, clean[0]) and np.allclose(clean[0], [0.2, 0.0, 0.0])
    assert 0.3 < float(np.std(noisy[:, 1])) < 0.7  # the noise, clipped to the full action
    assert abs(float(np.mean(noisy[:, 0])) - 0.2) < 0.1  # still heading for the goal on average
    assert np.array_equal(noisy, commands(noise=0.5, seed=3))
    assert not np.array_equal(noisy, commands(noise=0.5, seed=4))
    cfg = SimpleNamespace(script={"task": "push", "nosie": 0.5}, always_intervene=True)
    with pytest.raises(ValueError, match=r"teleop\.script.*\['nosie'\].*'noise'"):
        _make(cfg)
    with pytest.raises(ValueError, match=r"teleop\.script\.noise.*>= 0"):
        _make(SimpleNamespace(script={"task": "push", "noise": -1.0}, always_intervene=True))
