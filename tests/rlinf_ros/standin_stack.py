"""A stand-in for a robot stack someone already runs (ros2_control + franka_ros2), with standard
messages only: publishes ``/joint_states`` at 100 Hz, follows ``JointTrajectory`` messages on
``/<controller>/joint_trajectory`` like a JointTrajectoryController (linear from where the arm
is to each point at its ``time_from_start``), records ``PoseStamped`` targets of a Cartesian
impedance controller (moving the joints there by the Panda IK), and optionally publishes the
franka_ros2 state broadcaster's ``current_pose``.

    python tests/rlinf_ros/standin_stack.py --prefix fr3_ --controller fr3_arm_controller [--pose]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from ros_procs import spin_standin
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from rlinf_contracts.rotations import matrix_to_quat_xyzw
from rlinf_ros.conversions import joint_state_msg, pose_from_msg, pose_msg, trajectory_from_msg
from robot_drivers.kinematics import forward_kinematics, quat_xyzw_to_matrix, solve_ik
from robot_drivers.types import PANDA_HOME, EEPose


class StandInStack(Node):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__("standin_stack")
        self.names = [f"{args.prefix}joint{i}" for i in range(1, 8)]
        self.q = np.asarray(PANDA_HOME, dtype=np.float64)
        self.traj = None
        self.pub_js = self.create_publisher(JointState, "/joint_states", 10)
        self.pub_pose = (
            self.create_publisher(PoseStamped, "/franka_robot_state_broadcaster/current_pose", 10)
            if args.pose
            else None
        )
        self.create_subscription(
            JointTrajectory, f"/{args.controller}/joint_trajectory", self._on_traj, 10
        )
        self.create_subscription(PoseStamped, args.target_pose, self._on_pose_target, 10)
        self.create_timer(0.01, self._tick)

    def _on_traj(self, msg: JointTrajectory) -> None:
        self.traj = trajectory_from_msg(
            msg, self.names, time.time(), self.q
        )  # replaces, as the JTC does

    def _on_pose_target(self, msg: PoseStamped) -> None:
        pose = pose_from_msg(msg)
        goal = np.eye(4)
        goal[:3, :3], goal[:3, 3] = quat_xyzw_to_matrix(pose.quat_xyzw), pose.position
        q1 = solve_ik(self.q, goal, iters=50)
        self.traj = trajectory_from_msg(
            _one_point(self.names, q1, 0.05), self.names, time.time(), self.q
        )

    def _tick(self) -> None:
        now = time.time()
        if self.traj is not None:
            self.q = self.traj.sample(now)
            if now >= self.traj.end:
                self.traj = None
        self.pub_js.publish(
            joint_state_msg(self.names, self.q, np.zeros(7), np.zeros(7), stamp=now)
        )
        if self.pub_pose is not None:
            T = forward_kinematics(self.q)
            self.pub_pose.publish(
                pose_msg(EEPose(T[:3, 3], matrix_to_quat_xyzw(T[:3, :3])), stamp=now)
            )


def _one_point(names: list[str], q: np.ndarray, t: float) -> JointTrajectory:
    from rlinf_ros.conversions import trajectory_msg

    return trajectory_msg(names, q[None], np.array([t]), stamp=0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default="fr3_")
    ap.add_argument("--controller", default="fr3_arm_controller")
    ap.add_argument("--target-pose", default="/cartesian_impedance_controller/target_pose")
    ap.add_argument(
        "--pose", action="store_true", help="publish current_pose like franka_ros2's broadcaster"
    )
    args = ap.parse_args()
    spin_standin(lambda: StandInStack(args))


if __name__ == "__main__":
    main()
