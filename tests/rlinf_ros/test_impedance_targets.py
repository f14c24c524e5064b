"""ee_impedance on the policy client side, without ROS: an action becomes an end-effector
target pose (step_target of the measured position, orientation held), holds keep the last
target, and configs that cannot run the spec's gains are refused naming the key."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts.config import from_dict
from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.control import ImpedanceTargetDecoder, gripper_width
from rlinf_contracts.features import MissingInput, RobotReading
from rlinf_contracts.impedance import ImpedanceGains, step_target
from rlinf_contracts.rotations import rotvec_to_matrix
from rlinf_contracts.spec import ActionSpace, RobotSpec, SpecError, StateField
from rlinf_ros.config import RosGraphConfig
from rlinf_ros.policy_loop import InferResult, PolicyLoop
from rlinf_ros.robot_io import SpecIO

SPEC = RobotSpec(
    state=(StateField("ee_pos", 3), StateField("gripper_width", 1)),
    action=ActionSpace("ee_impedance", 4, pos_scale=0.02),
)
POS = np.array([0.45, -0.05, 0.30])
ROT = rotvec_to_matrix(np.array([[np.pi, 0.0, 0.1]]))[0]


def reading(pos: np.ndarray = POS, rot: np.ndarray | None = ROT) -> RobotReading:
    return RobotReading(q=np.zeros(7), dq=np.zeros(7), ee_pos=pos, ee_rot=rot, gripper_width=0.04)


def test_an_action_becomes_the_target_pose_of_step_target() -> None:
    io = SpecIO(SPEC)
    action = np.array([0.5, -1.0, 2.0, 0.2])  # z beyond 1: clipped, as in the simulator
    (step,) = io.decode(action[None], [reading()])
    (pose,) = step.poses or []
    want = step_target(POS, action[:3], 0.02)
    assert np.array_equal(pose[:3, 3], want)
    assert np.allclose(want, POS + [0.01, -0.02, 0.02])
    assert np.array_equal(pose[:3, :3], ROT) and np.array_equal(pose[3], [0, 0, 0, 1])
    assert step.grippers == [pytest.approx(float(gripper_width(0.2)))]


def test_orientation_is_held_from_the_episode_start_and_chunks_continue_from_targets() -> None:
    io = SpecIO(SPEC)
    io.begin_episode([reading()])
    turned = rotvec_to_matrix(np.array([[0.0, 0.0, 0.5]]))[0] @ ROT
    chunk = np.array([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0]])
    first, second = io.decode(chunk, [reading(rot=turned)])
    assert np.array_equal(first.poses[0][:3, :3], ROT)  # type: ignore[index]  # poses is set for impedance actions
    assert np.array_equal(first.poses[0][:3, 3], step_target(POS, chunk[0, :3], 0.02))  # type: ignore[index]  # poses is set for impedance actions
    assert np.array_equal(
        second.poses[0][:3, 3],  # type: ignore[index]  # poses is set for impedance actions
        step_target(first.poses[0][:3, 3], chunk[1, :3], 0.02),  # type: ignore[index]  # poses is set for impedance actions
    )


def test_no_pose_yet_is_a_missing_input_not_a_crash() -> None:
    with pytest.raises(MissingInput, match="current_pose"):
        SpecIO(SPEC).decode(np.zeros((1, 4)), [reading(pos=None, rot=None)])  # type: ignore[arg-type]  # a reading without a pose on purpose


def test_the_decoder_refuses_other_modes() -> None:
    with pytest.raises(SpecError, match="ee_impedance"):
        ImpedanceTargetDecoder(ActionSpace("ee_delta_pos", 4))


class _Worker:
    refused, connected, busy = "", True, False

    def __init__(self) -> None:
        self.results: list[InferResult] = []

    def take(self) -> InferResult | None:
        return self.results.pop(0) if self.results else None

    def submit(self, *a: object) -> bool:
        return False

    def wait(self, timeout: float) -> bool:
        return False


def test_the_loop_holds_the_measured_pose_then_the_last_target() -> None:
    worker = _Worker()
    loop = PolicyLoop(worker, SpecIO(SPEC))  # type: ignore[arg-type]  # a stand-in worker
    hold = loop.tick(None, [reading()], None)
    assert hold is not None and hold.kind == "hold" and hold.poses is not None
    assert np.array_equal(hold.poses[0][:3, 3], POS)
    worker.results.append(InferResult(np.array([[0.0, 0.0, -1.0, 1.0]]), [reading()], 0.0, 0.01))
    act = loop.tick(None, [reading()], None)
    assert act is not None and act.kind == "policy" and act.poses is not None
    assert np.allclose(act.poses[0][:3, 3], POS - [0, 0, 0.02])
    again = loop.tick(None, [reading(pos=POS + 0.1)], None)
    assert again is not None and again.kind == "hold"
    assert np.array_equal(again.poses[0][:3, 3], act.poses[0][:3, 3])  # type: ignore[index]  # poses is set for impedance actions


def _graph(arm: dict, impedance: dict | None = None) -> RosGraphConfig:
    action = {"control": "ee_impedance", "dim": 4}
    if impedance is not None:
        action["impedance"] = impedance
    return from_dict(
        RosGraphConfig,
        {
            "robot": {"arms": [arm]},
            "policy_client": {
                "enabled": True,
                "cameras": {},
                "robot_spec": {"state": [["ee_pos", 3]], "action": action},
            },
        },
    )


def test_graph_config_needs_impedance_arms_with_the_spec_gains() -> None:
    _graph({"backend": "sim", "control": "ee_impedance"}).validate()
    with pytest.raises(ConfigError, match=r"robot.arms\[arm\].control"):
        _graph({"backend": "sim"}).validate()
    with pytest.raises(ConfigError, match=r"robot.arms\[arm\].impedance.*stiffness_pos"):
        _graph({"backend": "sim", "control": "ee_impedance"}, {"stiffness_pos": 300.0}).validate()
    same = ImpedanceGains(stiffness_pos=300.0).to_dict()
    _graph({"backend": "sim", "control": "ee_impedance", "impedance": same}, same).validate()
