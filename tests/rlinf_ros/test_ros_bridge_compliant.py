"""Bridge mode onto compliant controllers over real DDS: our robot node on top of stand-ins for
CRISP's Cartesian controller and franka_ros2's FR3 Cartesian impedance example
(``standin_compliant.py``, upstream names, standard messages). The bridge writes the spec's gains
through the controller's parameter services (read back here), streams the safe targets as poses,
and the stand-in's arm follows; a controller without the gain parameters is refused at start. The
stand-ins speak the Franka Hand's TCP (franka_ros2's ``O_T_EE``, CRISP's ``fr3_hand_tcp``); a
grip-site goal sent to our node reaches them as the TCP's pose and comes back as the goal."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import ROOT, Probe, Procs

from rlinf_contracts.spec import RobotSpec

pytestmark = [pytest.mark.ros]

# the stand-in's own current_pose (the hand TCP), per flavor
STACK_POSE = {
    "crisp": "/left/current_pose",
    "franka": "/franka_robot_state_broadcaster/current_pose",
}
# flavor -> (bridge overrides, controller node, stack's joint_states, parameter -> spec gain)
CASES = {
    "crisp": (
        {"target": "crisp_cartesian_impedance", "namespace": "left"},
        "/left/cartesian_impedance_controller",
        "/left/joint_states",
        {
            **{f"task.k_pos_{a}": "stiffness_pos" for a in "xyz"},
            **{f"task.d_rot_{a}": "damping_rot" for a in "xyz"},
            "nullspace.stiffness": "nullspace_stiffness",
            "nullspace.damping": "nullspace_damping",
        },
    ),
    "franka": (
        {
            "target": "franka_cartesian_impedance",
            "controller": "cartesian_impedance_example_controller",
            "joint_states": "/joint_states",
            "ee_pose": "/franka_robot_state_broadcaster/current_pose",
        },
        "/cartesian_impedance_example_controller",
        "/joint_states",
        {
            "translational_stiffness": "stiffness_pos",
            "rotational_stiffness": "stiffness_rot",
            "nullspace_stiffness": "nullspace_stiffness",
        },
    ),
}


def _config(tmp_path: Path, bridge: dict) -> tuple[Path, RobotSpec]:
    cfg = yaml.safe_load((ROOT / "configs/ros_bridge_crisp.yaml").read_text())
    cfg["robot"]["bridge"].update(bridge)
    spec = RobotSpec.from_dict(cfg["policy_client"]["robot_spec"])
    path = tmp_path / "bridge.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, spec


def _get_parameters(probe: Probe, node: str, names: list[str]) -> dict[str, float]:
    from rcl_interfaces.srv import GetParameters

    client = probe.node.create_client(GetParameters, f"{node}/get_parameters")
    assert client.wait_for_service(timeout_sec=30), f"{node}/get_parameters not available"
    fut = client.call_async(GetParameters.Request(names=names))
    probe.wait_for(fut.done, 30, f"{node}/get_parameters answer")
    return {n: v.double_value for n, v in zip(names, fut.result().values, strict=True)}


@pytest.mark.parametrize("flavor", sorted(CASES))
def test_bridge_sets_gains_and_streams_poses_the_arm_follows(
    tmp_path: Path, ros_domain_id: int, flavor: str
) -> None:
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState

    from rlinf_contracts.rotations import quat_xyzw_to_matrix
    from rlinf_ros.conversions import pose_from_msg, pose_msg
    from robot_drivers.kinematics import o_t_ee_from_grip_site
    from robot_drivers.types import EEPose

    bridge, node, joint_states, params = CASES[flavor]
    config, spec = _config(tmp_path, bridge)
    gains = spec.action.impedance
    assert gains is not None
    procs, probe = Procs(tmp_path), None
    try:
        ns = ["--namespace", bridge["namespace"]] if "namespace" in bridge else []
        procs.start(
            "controller",
            [str(ROOT / "tests/rlinf_ros/standin_compliant.py"), "--flavor", flavor, *ns],
        )
        procs.start_node("robot", config)
        probe = Probe()
        stack = probe.record(JointState, joint_states, lambda m: np.array(m.position))
        ours = probe.record(
            PoseStamped, "/rlinf/franka_robot_state_broadcaster/current_pose", pose_from_msg
        )
        hand = probe.record(PoseStamped, STACK_POSE[flavor], pose_from_msg)
        target_in = probe.node.create_publisher(
            PoseStamped, "/rlinf/cartesian_impedance_controller/target_pose", 10
        )
        probe.wait_for(
            lambda: stack and ours and target_in.get_subscription_count() > 0,
            60,
            "bridge up",
            procs,
        )
        # the controller runs the spec's compliance: read back through its parameter service
        got = _get_parameters(probe, node, sorted(params))
        want = {p: float(getattr(gains, g)) for p, g in params.items()}
        assert got == pytest.approx(want, rel=1e-12), (got, want)
        assert got[sorted(params)[0]] != 0.0

        # stream a target pose each control step (10 Hz): the stand-in's arm gets there
        p0 = ours[-1][1]
        goal = EEPose(p0.position + np.array([0.04, -0.03, 0.02]), p0.quat_xyzw)
        deadline = time.time() + 60
        reached = False
        while time.time() < deadline and not reached:
            target_in.publish(pose_msg(goal))
            time.sleep(0.1)
            with probe.lock:
                reached = np.linalg.norm(ours[-1][1].position - goal.position) < 3e-3
        assert reached, f"arm at {ours[-1][1].position}, goal {goal.position}\n{procs.logs()}"
        # ... with its hand's TCP (the controller's frame) where the goal puts it
        site = np.eye(4)
        site[:3, :3], site[:3, 3] = quat_xyzw_to_matrix(goal.quat_xyzw), goal.position
        tcp = o_t_ee_from_grip_site(site)[:3, 3]
        with probe.lock:
            at = hand[-1][1].position
        assert np.linalg.norm(at - tcp) < 4e-3 and np.linalg.norm(at - goal.position) > 5e-3, at
    finally:
        if probe is not None:
            probe.close()
        codes = procs.stop_all()
    assert codes["robot"] == 0


@pytest.mark.parametrize("flavor", sorted(CASES))
def test_bridge_refuses_a_controller_without_the_gain_parameters(
    tmp_path: Path, ros_domain_id: int, flavor: str
) -> None:
    bridge, node, _, params = CASES[flavor]
    config, _ = _config(tmp_path, bridge)
    procs = Procs(tmp_path)
    try:
        ns = ["--namespace", bridge["namespace"]] if "namespace" in bridge else []
        procs.start(
            "controller",
            [
                str(ROOT / "tests/rlinf_ros/standin_compliant.py"),
                "--flavor",
                flavor,
                "--no-gains",
                *ns,
            ],
        )
        robot = procs.start_node("robot", config)
        code = robot.wait(timeout=90)
        log = (tmp_path / "robot.log").read_text()
        assert code == 2, log
        assert f"controller node {node} has no parameter(s)" in log, log
        assert all(p in log for p in params), log
    finally:
        procs.stop_all()
