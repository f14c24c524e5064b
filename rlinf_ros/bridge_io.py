"""Bridge mode's ROS side: wire a :class:`~robot_drivers.bridge_arm.BridgeArmBackend` to a stack
someone already runs (ros2_control ``JointTrajectoryController``, franka_ros2's or CRISP's
Cartesian impedance controller), picked by ``robot.bridge.target`` from
:mod:`robot_drivers.bridge_controllers`; a compliant target first gets the spec's gains
(:mod:`rlinf_ros.bridge_gains`). Names and sources: ``docs/bridge_controllers.md``.

In: the stack's ``/joint_states`` (joints picked by name, reordered), franka_ros2's
``current_pose`` if configured, a gripper's finger joint states. Out: each safe target of the
robot node's driver tick, as a one-point ``JointTrajectory`` on ``/<controller>/joint_trajectory``
(``time_from_start`` = ``point_time_s``), or as a ``PoseStamped`` (forward kinematics of the safe
joint target in the controller's end-effector frame, ``robot.arms[0].stack_ee_frame``; Panda /
FR3 only) on the Cartesian controller's topic. The robot node keeps
publishing our own names (``joint_states``, ``current_pose``, ``robot_state``) in its namespace,
so the policy client, recorder and teleop nodes see a bridged arm as any other.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from rlinf_contracts.config import ConfigError
from rlinf_ros.bridge_gains import apply_gains
from rlinf_ros.config import BridgeConfig
from rlinf_ros.conversions import (
    ConversionError,
    joint_state_to_arrays,
    pose_from_msg,
    pose_msg,
    trajectory_msg,
)
from robot_drivers.arm import FrankaArm
from robot_drivers.bridge_arm import BridgeArmBackend
from robot_drivers.bridge_controllers import resolve

log = logging.getLogger(__name__)


def bridged(arms: list[FrankaArm]) -> list[tuple[int, FrankaArm, BridgeArmBackend]]:
    return [
        (i, a, a.backend) for i, a in enumerate(arms) if isinstance(a.backend, BridgeArmBackend)
    ]


def attach_bridges(node: Any, arms: list[FrankaArm], cfg: BridgeConfig, driver_hz: float) -> None:
    """Subscribe ``node`` to the stack and give each bridged arm its command sinks."""
    found = bridged(arms)
    if not found:
        return
    cfg.validate()
    if len(found) > 1:
        raise ConfigError(
            "key 'robot.arms': bridge mode drives one arm per robot node; start one node per arm "
            "(namespaces) for two"
        )
    _, arm, backend = found[0]
    target = cfg.target_controller()
    controller = cfg.controller or target.default_controller
    ns = cfg.namespace
    if target.command == "pose" and backend.fk is None:
        raise ConfigError(
            f"key 'robot.bridge.target': {target.name} takes a pose, which needs kinematics: "
            "panda (the safe joint target is turned into a pose by forward kinematics); use "
            "franka_joint_trajectory"
        )
    if target.takes_gains:  # before the first target: the controller runs the spec's compliance
        apply_gains(
            node.context,
            target.parameter_node(ns, controller),
            target.gain_values(cfg.gains()),
            cfg.parameter_timeout_s,
        )
    from rlinf_ros.nodes.common import reliable_qos, sensor_qos

    horizon = cfg.point_time_s or 2.0 / driver_hz
    topic = target.command_topic(ns, controller, configured=cfg.target_pose)
    if target.command == "joint_trajectory":
        pub = node.create_publisher(JointTrajectory, topic, reliable_qos(10))
        backend.send_joints = lambda q: pub.publish(
            trajectory_msg(backend.joint_names, q[None], np.array([horizon]), stamp=0.0)
        )
    else:
        pub = node.create_publisher(PoseStamped, topic, reliable_qos(10))

        def send_pose(q: np.ndarray) -> None:  # in the controller's frame (stack_ee_frame)
            pub.publish(pose_msg(backend.controller_pose(q), frame_id=cfg.frame_id))

        backend.send_joints = send_pose
    if cfg.gripper_command:
        gtopic = resolve(cfg.gripper_command, ns, controller)
        gpub = node.create_publisher(JointTrajectory, gtopic, reliable_qos(10))
        finger = arm.gripper_joint_names[0]
        backend.send_gripper = lambda w: (
            gpub.publish(trajectory_msg([finger], np.array([[w / 2]]), np.array([0.5]), stamp=0.0))
            or True
        )

    def on_joints(msg: JointState) -> None:
        try:
            q, dq, tau = joint_state_to_arrays(msg, backend.joint_names)
        except ConversionError as e:
            log.warning("bridge: %s", e)
            return
        backend.update_joints(q, dq, tau, stamp=arm.now())

    joint_states = resolve(cfg.joint_states, ns, controller)
    ee_pose = resolve(cfg.ee_pose, ns, controller) if cfg.ee_pose else ""
    node.create_subscription(JointState, joint_states, on_joints, sensor_qos())
    if ee_pose:
        node.create_subscription(
            PoseStamped, ee_pose, lambda m: _on_pose(backend, arm, m), sensor_qos()
        )
    if cfg.gripper_joint_states:
        node.create_subscription(
            JointState,
            resolve(cfg.gripper_joint_states, ns, controller),
            lambda m: backend.update_gripper(2.0 * m.position[0]) if len(m.position) else None,
            sensor_qos(),
        )
    pose_note = {
        "stack": ee_pose,
        "fk": "Panda forward kinematics",
        "none": "NONE (no Cartesian features)",
    }
    log.info(
        "bridge: %s joints %s from %s -> %s (%s); EE pose from %s",
        arm.name,
        backend.joint_names,
        joint_states,
        topic,
        target.name,
        ee_pose or pose_note[backend.ee_pose_source],
    )


def _on_pose(backend: BridgeArmBackend, arm: FrankaArm, msg: PoseStamped) -> None:
    try:
        backend.update_pose(pose_from_msg(msg), stamp=arm.now())
    except ConversionError as e:
        log.warning("bridge: EE pose: %s", e)
