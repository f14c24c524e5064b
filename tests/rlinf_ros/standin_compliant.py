"""A stand-in for a compliant Cartesian controller someone already runs -- CRISP's
CartesianController (+ its pose_broadcaster) or franka_ros2's FR3 Cartesian impedance example --
speaking the upstream names with standard messages only.

Why its own copy of the names and not ``robot_drivers.bridge_controllers``: the test must fail
when the bridge's table drifts from what the controllers really call things, so the stand-in
spells them as the upstream sources do (see docs/bridge_controllers.md).

It subscribes to the target pose, declares the gain parameters (served by rclpy's standard
parameter services, so ``set_parameters`` / ``get_parameters`` / ``list_parameters`` work as on
a controller node), and moves a unit-mass end effector toward the target under the stiffness /
damping it currently has (1 ms substeps), publishing ``joint_states`` (Panda IK of that pose)
and the current pose. ``--no-gains`` declares none of the gain parameters.

    python tests/rlinf_ros/standin_compliant.py --flavor crisp --namespace fr3 [--no-gains]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from ros_procs import spin_standin
from sensor_msgs.msg import JointState

from rlinf_contracts.rotations import matrix_to_quat_xyzw
from rlinf_ros.conversions import joint_state_msg, pose_from_msg, pose_msg
from robot_drivers.kinematics import forward_kinematics, quat_xyzw_to_matrix, solve_ik
from robot_drivers.types import PANDA_HOME, EEPose

# upstream names: node, target topic, joint states, current pose, gain parameters (defaults),
# and which of them are the translational stiffness / damping (damping < 0 = 2 sqrt(k))
FLAVORS: dict[str, dict] = {
    "crisp": {
        "node": "cartesian_impedance_controller",
        "target": "target_pose",
        "joint_states": "joint_states",
        "current_pose": "current_pose",
        "params": {
            **{f"task.k_pos_{a}": 500.0 for a in "xyz"},
            **{f"task.k_rot_{a}": 30.0 for a in "xyz"},
            **{f"task.d_pos_{a}": -1.0 for a in "xyz"},
            **{f"task.d_rot_{a}": -1.0 for a in "xyz"},
            "nullspace.stiffness": 1.0,
            "nullspace.damping": -1.0,
        },
        "k_pos": "task.k_pos_x",
        "d_pos": "task.d_pos_x",
    },
    "franka": {
        "node": "cartesian_impedance_example_controller",
        "target": "~/equilibrium_pose",
        "joint_states": "/joint_states",
        "current_pose": "/franka_robot_state_broadcaster/current_pose",
        "params": {
            "translational_stiffness": 150.0,
            "rotational_stiffness": 10.0,
            "nullspace_stiffness": 20.0,
        },
        "k_pos": "translational_stiffness",
        "d_pos": "",
    },
}


class StandInCompliant(Node):
    def __init__(self, args: argparse.Namespace) -> None:
        flavor = FLAVORS[args.flavor]
        super().__init__(flavor["node"], namespace=args.namespace or None)
        self.flavor = flavor
        self.gains = not args.no_gains
        if self.gains:
            for name, value in flavor["params"].items():
                self.declare_parameter(name, value)
        self.names = [f"{args.prefix}joint{i}" for i in range(1, 8)]
        self.q = np.asarray(PANDA_HOME, dtype=np.float64)
        T = forward_kinematics(self.q)
        self.x, self.v, self.rot = T[:3, 3].copy(), np.zeros(3), T[:3, :3].copy()
        self.target: tuple[np.ndarray, np.ndarray] | None = None
        self.pub_js = self.create_publisher(JointState, flavor["joint_states"], 10)
        self.pub_pose = self.create_publisher(PoseStamped, flavor["current_pose"], 10)
        self.create_subscription(PoseStamped, flavor["target"], self._on_target, 10)
        self.create_timer(0.01, self._tick)

    def _on_target(self, msg: PoseStamped) -> None:
        pose = pose_from_msg(msg)
        self.target = (np.asarray(pose.position), quat_xyzw_to_matrix(pose.quat_xyzw))

    def _gain(self, key: str, default: float) -> float:
        if not self.gains or not key:
            return default
        return float(self.get_parameter(key).value)

    def _tick(self) -> None:
        if self.target is not None:
            k = self._gain(self.flavor["k_pos"], 0.0)
            d = self._gain(self.flavor["d_pos"], -1.0)
            d = 2.0 * math.sqrt(k) if d < 0 else d
            for _ in range(10):  # 1 ms substeps: stiff gains stay stable
                self.v += 0.001 * (k * (self.target[0] - self.x) - d * self.v)
                self.x += 0.001 * self.v
            self.rot = self.target[1]
            goal = np.eye(4)
            goal[:3, :3], goal[:3, 3] = self.rot, self.x
            self.q = solve_ik(self.q, goal, iters=20)
        now = time.time()
        self.pub_js.publish(
            joint_state_msg(self.names, self.q, np.zeros(7), np.zeros(7), stamp=now)
        )
        T = forward_kinematics(self.q)
        self.pub_pose.publish(pose_msg(EEPose(T[:3, 3], matrix_to_quat_xyzw(T[:3, :3])), stamp=now))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flavor", choices=sorted(FLAVORS), default="crisp")
    ap.add_argument("--namespace", default="")
    ap.add_argument("--prefix", default="fr3_")
    ap.add_argument("--no-gains", action="store_true", help="declare none of the gain parameters")
    args = ap.parse_args()
    spin_standin(lambda: StandInCompliant(args))


if __name__ == "__main__":
    main()
