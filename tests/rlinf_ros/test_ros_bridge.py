"""Bridge mode over real DDS: our robot node on top of a stand-in ros2_control / franka_ros2 stack
(``standin_stack.py``: /joint_states at 100 Hz, a JointTrajectoryController and a Cartesian
target topic, standard messages only), with the safety layer in the command path. The stack
speaks the Franka Hand's TCP (franka_ros2's ``O_T_EE``); our node reports the grip site."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import ROOT, Probe, Procs

from rlinf_contracts.rotations import quat_xyzw_to_matrix
from robot_drivers.kinematics import forward_kinematics, grip_site_fk, grip_site_from_o_t_ee
from robot_drivers.types import PANDA_DQ_MAX, PANDA_HOME, EEPose

pytestmark = [pytest.mark.ros]

NAMES = [f"fr3_joint{i}" for i in range(1, 8)]


def _matrix(pose: EEPose) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = quat_xyzw_to_matrix(pose.quat_xyzw), pose.position
    return T


def _config(tmp_path: Path, **bridge: object) -> Path:
    cfg = yaml.safe_load((ROOT / "configs/ros_bridge_franka_ros2.yaml").read_text())
    cfg["policy_client"]["enabled"] = False
    cfg["robot"]["bridge"].update(bridge)
    path = tmp_path / "bridge.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _start(tmp_path: Path, procs: Procs, config: Path, *stack_args: str) -> None:
    procs.start(
        "stack",
        [
            str(ROOT / "tests/rlinf_ros/standin_stack.py"),
            "--prefix",
            "fr3_",
            "--controller",
            "fr3_arm_controller",
            *stack_args,
        ],
    )
    procs.start_node("robot", config)


def test_bridge_trajectory_controller_safety_watchdog_estop(
    tmp_path: Path, ros_domain_id: int
) -> None:
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from rlinf_ros.conversions import pose_from_msg, trajectory_from_msg, trajectory_msg

    procs, probe = Procs(tmp_path), None
    try:
        _start(tmp_path, procs, _config(tmp_path, ee_pose=""))  # no pose topic: Panda FK
        probe = Probe()
        ours = probe.record(
            JointState, "/rlinf/joint_states", lambda m: (list(m.name), np.array(m.position))
        )
        stack = probe.record(JointState, "/joint_states", lambda m: np.array(m.position))
        pose = probe.record(
            PoseStamped, "/rlinf/franka_robot_state_broadcaster/current_pose", pose_from_msg
        )
        state = probe.record(
            String,
            "/rlinf/franka_robot_state_broadcaster/robot_state",
            lambda m: json.loads(m.data),
        )
        sent = probe.record(
            JointTrajectory,
            "/fr3_arm_controller/joint_trajectory",
            lambda m: trajectory_from_msg(m, NAMES, 0.0).positions[-1],
        )
        cmd = probe.node.create_publisher(
            JointTrajectory, "/rlinf/joint_trajectory_controller/joint_trajectory", 10
        )
        probe.wait_for(
            lambda: ours and stack and pose and state and cmd.get_subscription_count() > 0,
            60,
            "bridge up",
            procs,
        )
        names, q0 = ours[-1][1]
        assert names == NAMES and np.allclose(q0, PANDA_HOME, atol=1e-6)
        assert np.allclose(pose[-1][1].position, grip_site_fk(q0)[:3, 3], atol=1e-6)
        assert np.allclose(_matrix(pose[-1][1])[:3, :3], grip_site_fk(q0)[:3, :3], atol=1e-6)
        assert state[-1][1]["arms"]["fr3"]["bridge"]["ee_pose_source"] == "fk"

        # a move within the limits reaches the stack's controller and the stack's arm follows
        cmd.publish(
            trajectory_msg(NAMES, (q0 + 0.05)[None], np.array([0.15]))
        )  # within watchdog_ms
        probe.wait_for(
            lambda: np.allclose(stack[-1][1], q0 + 0.05, atol=2e-3),
            10,
            "stack arm at target",
            procs,
        )
        probe.wait_for(
            lambda: np.allclose(ours[-1][1][1], q0 + 0.05, atol=2e-3), 5, "our joint_states follow"
        )

        # a 4 s move sent once (sender then silent): the watchdog stops it at watchdog_ms (200 ms),
        # and no command the stack receives breaks the speed limit (0.3 x dq_max). Waited for by
        # events, not a fixed sleep: the stale refusal, then the stack's arm at the last target
        # sent. (How far it gets within the watchdog in real time: benchmarks/ros_rates.py.)
        q1, n0 = stack[-1][1].copy(), len(sent)
        cmd.publish(
            trajectory_msg(NAMES, (q1 + np.array([1.0, 0, 0, 0, 0, 0, 0]))[None], np.array([4.0]))
        )
        probe.wait_for(
            lambda: state[-1][1]["arms"]["fr3"]["safety"].get("stale_refused", 0) > 0,
            60,
            "stale event",
            procs,
        )
        probe.wait_for(
            lambda: len(sent) > n0 and np.allclose(stack[-1][1], sent[-1][1], atol=1e-3),
            30,
            "the stack's arm at the last target it received",
            procs,
        )
        moved = stack[-1][1][0] - q1[0]
        # the arm clock is wall time here: a late tick only shortens the move, never lengthens it
        assert moved < 0.3 * PANDA_DQ_MAX[0] * 0.35, (
            f"moved {moved} rad after a silent 4 s trajectory"
        )
        targets = np.array([s[1] for s in sent[n0:]])
        steps = np.diff(targets[:, 0])
        # per received command toward the goal (+): <= 3 driver periods' worth (a late tick may
        # carry 2; one more when a command is lost or late on DDS). A step back is the watchdog's
        # hold at the arm's measured position, which trails the target by more under load: not a
        # speed-up.
        assert len(steps) == 0 or steps.max() <= 0.3 * PANDA_DQ_MAX[0] * 0.03 + 1e-6, steps
        # and on average the arm keeps to the limit over the whole cut-off move
        times = np.array([s[0] for s in sent[n0:]])
        assert (
            abs(targets[-1, 0] - targets[0, 0])
            <= 0.3 * PANDA_DQ_MAX[0] * (times[-1] - times[0] + 0.02) + 1e-6
        )

        # e-stop latches in our node: the stack receives nothing that moves the arm, checked once
        # the node has refused the new trajectory (its estop_refused counter), not after a sleep
        assert probe.call_trigger("/rlinf/estop")[0]
        q2 = stack[-1][1].copy()
        refused0 = state[-1][1]["arms"]["fr3"]["safety"].get("estop_refused", 0)
        cmd.publish(trajectory_msg(NAMES, (q2 - 0.05)[None], np.array([0.3])))
        probe.wait_for(
            lambda: state[-1][1]["arms"]["fr3"]["safety"].get("estop_refused", 0) > refused0,
            30,
            "the trajectory refused while e-stopped",
            procs,
        )
        assert np.allclose(stack[-1][1], q2, atol=1e-6)
        assert probe.call_trigger("/rlinf/reset_estop")[0]
    finally:
        if probe is not None:
            probe.close()
        codes = procs.stop_all()
    assert codes["robot"] == 0


def test_bridge_cartesian_controller_and_stack_pose_and_stale_stack(
    tmp_path: Path, ros_domain_id: int
) -> None:
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from rlinf_ros.conversions import pose_from_msg, trajectory_msg

    procs, probe = Procs(tmp_path), None
    try:
        _start(tmp_path, procs, _config(tmp_path, command="cartesian_pose"), "--pose")
        probe = Probe()
        stack = probe.record(JointState, "/joint_states", lambda m: np.array(m.position))
        stack_pose = probe.record(
            PoseStamped, "/franka_robot_state_broadcaster/current_pose", pose_from_msg
        )
        ours = probe.record(
            PoseStamped, "/rlinf/franka_robot_state_broadcaster/current_pose", pose_from_msg
        )
        targets = probe.record(
            PoseStamped, "/cartesian_impedance_controller/target_pose", pose_from_msg
        )
        state = probe.record(
            String,
            "/rlinf/franka_robot_state_broadcaster/robot_state",
            lambda m: json.loads(m.data),
        )
        cmd = probe.node.create_publisher(
            JointTrajectory, "/rlinf/joint_trajectory_controller/joint_trajectory", 10
        )
        probe.wait_for(
            lambda: (
                stack
                and state
                and cmd.get_subscription_count() > 0
                and state[-1][1]["arms"]["fr3"]["bridge"]["ee_pose_source"] == "stack"
            ),
            60,
            "bridge up",
            procs,
        )
        # the stack's hand-TCP pose comes out of our node as the grip site (6.9 mm further in)
        probe.wait_for(lambda: bool(stack_pose and ours), 10, "stack's and our current_pose", procs)
        with probe.lock:
            hand, site = _matrix(stack_pose[-1][1]), _matrix(ours[-1][1])
        assert np.allclose(site, grip_site_from_o_t_ee(hand), atol=1e-6)
        assert np.linalg.norm(site[:3, 3] - hand[:3, 3]) == pytest.approx(0.0069, abs=1e-4)

        q0 = stack[-1][1].copy()
        goal = q0 + np.array([0.0, 0.05, 0.0, 0.05, 0.0, 0.0, 0.0])
        cmd.publish(trajectory_msg(NAMES, goal[None], np.array([0.15])))
        probe.wait_for(lambda: len(targets) > 5, 5, "Cartesian targets at the stack", procs)
        want = forward_kinematics(goal)[:3, 3]
        probe.wait_for(
            lambda: np.linalg.norm(forward_kinematics(stack[-1][1])[:3, 3] - want) < 3e-3,
            10,
            "stack EE at the FK of the safe joint target",
            procs,
        )
        # the target goes out in the controller's frame (the hand TCP), the grip site's twin
        sent = _matrix(targets[-1][1])
        assert np.linalg.norm(sent[:3, 3] - want) < 1e-3
        assert np.allclose(sent[:3, :3], forward_kinematics(goal)[:3, :3], atol=1e-3)
        assert np.linalg.norm(grip_site_from_o_t_ee(sent)[:3, 3] - grip_site_fk(goal)[:3, 3]) < 1e-3

        procs.kill("stack")  # the stack dies: our node reports it, the policy client would stop
        probe.wait_for(
            lambda: "joint_states_stale" in state[-1][1]["arms"]["fr3"]["errors"], 5, "stale stack"
        )
    finally:
        if probe is not None:
            probe.close()
        codes = procs.stop_all()
    assert codes["robot"] == 0
