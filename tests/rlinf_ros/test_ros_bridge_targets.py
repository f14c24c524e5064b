"""Bridge targets as data (no ROS): names resolve in a namespace, gains map onto each
controller's parameters, and what a controller cannot realise is refused with the key named."""

from __future__ import annotations

import math

import pytest

from rlinf_contracts.config import ConfigError
from rlinf_contracts.impedance import ImpedanceGains
from rlinf_contracts.spec import RobotSpec
from rlinf_ros.config import BridgeConfig
from robot_drivers.bridge_controllers import BRIDGE_CONTROLLERS, bridge_controller, resolve


def test_registry_names_and_topics_resolve_in_a_namespace() -> None:
    assert BRIDGE_CONTROLLERS.names() == [
        "crisp_cartesian_impedance",
        "franka_cartesian_impedance",
        "franka_cartesian_pose",
        "franka_joint_trajectory",
    ]
    crisp = bridge_controller("crisp_cartesian_impedance")
    assert crisp.command_topic("", "cartesian_impedance_controller") == "/target_pose"
    assert crisp.command_topic("/left/", "x") == "/left/target_pose"
    assert crisp.parameter_node("left", "cartesian_impedance_controller") == (
        "/left/cartesian_impedance_controller"
    )
    franka = bridge_controller("franka_cartesian_impedance")
    assert franka.command_topic("fr3", "cic") == "/fr3/cic/equilibrium_pose"
    pose = bridge_controller("franka_cartesian_pose")
    assert pose.command_topic("ns", "c", configured="/my/target") == "/my/target"
    with pytest.raises(ConfigError, match="robot.bridge.target_pose"):
        pose.command_topic("ns", "c")
    assert resolve("/joint_states", "left", "c") == "/joint_states"
    with pytest.raises(ConfigError, match="robot.bridge.target.*did you mean"):
        bridge_controller("crisp_cartesian_impedence")


def test_gains_map_onto_each_controllers_parameters() -> None:
    g = ImpedanceGains(stiffness_pos=400.0, stiffness_rot=30.0, damping_pos=50.0)
    crisp = bridge_controller("crisp_cartesian_impedance").gain_values(g)
    assert len(crisp) == 14
    assert {crisp[f"task.k_pos_{a}"] for a in "xyz"} == {400.0}
    assert {crisp[f"task.d_pos_{a}"] for a in "xyz"} == {50.0}
    assert crisp["task.d_rot_z"] == pytest.approx(2 * math.sqrt(30.0))
    # franka's example derives damping (2 sqrt(k)): a spec asking for another one is refused
    franka = bridge_controller("franka_cartesian_impedance")
    with pytest.raises(ConfigError, match=r"robot.bridge.impedance.damping_pos.*2 sqrt"):
        franka.gain_values(g)
    ok = franka.gain_values(ImpedanceGains(stiffness_pos=400.0, nullspace_stiffness=5.0))
    assert ok == {
        "translational_stiffness": 400.0,
        "rotational_stiffness": 60.0,
        "nullspace_stiffness": 5.0,
    }
    assert bridge_controller("franka_joint_trajectory").gain_values(g) == {}


def test_bridge_config_targets_and_spec_check() -> None:
    assert BridgeConfig().target_controller().name == "franka_joint_trajectory"
    assert BridgeConfig(command="cartesian_pose").target_controller().name == (
        "franka_cartesian_pose"
    )
    with pytest.raises(ConfigError, match="robot.bridge.impedance.damping_pos"):
        BridgeConfig(target="franka_cartesian_impedance", impedance={"damping_pos": 1.0}).validate()
    with pytest.raises(ConfigError, match="robot.bridge.impedance"):
        BridgeConfig(target="crisp_cartesian_impedance", impedance={"stiffnes_pos": 1.0}).gains()
    spec = RobotSpec.from_dict(
        {
            "state": [["ee_pos", 3]],
            "action": {"control": "ee_impedance", "dim": 4, "impedance": {"stiffness_pos": 300}},
        }
    )
    BridgeConfig(target="crisp_cartesian_impedance", impedance={"stiffness_pos": 300}).check_spec(
        spec
    )
    with pytest.raises(ConfigError, match="differ.*stiffness_pos"):
        BridgeConfig(target="crisp_cartesian_impedance").check_spec(spec)
    with pytest.raises(ConfigError, match="needs a Cartesian target"):
        BridgeConfig(target="franka_joint_trajectory").check_spec(spec)
