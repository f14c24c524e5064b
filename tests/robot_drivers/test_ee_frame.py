"""The end-effector frame a policy sees: the MuJoCo twin's grip site, on the libfranka backend too.

Why: a policy trained in simulation reads ``ee_pos`` / ``ee_rot6d`` of the grip site
(``gripper0_grip_site``); libfranka reports ``O_T_EE``, the Franka Hand's TCP, 6.9 mm further
out and turned 90 degrees about z. Measured on franky-sim before the conversion: the demo reach
checkpoint reached 0 of 5 goals, its wrist rotations fighting an orientation it had never seen.
``robot_drivers.kinematics`` holds the conversion (through the flange, with the robot's own
``F_T_EE``); these tests pin its numbers to the compiled MuJoCo scene.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts.rotations import matrix_to_rotvec, quat_xyzw_to_matrix, rotvec_to_matrix
from robot_drivers.kinematics import (
    F_T_GRIP_SITE,
    F_T_HAND_TCP,
    forward_kinematics,
    grip_site_from_o_t_ee,
    o_t_ee_from_grip_site,
)
from robot_drivers.types import PANDA_HOME

# the reach spec's home (robosuite's Panda home, the demo policy's start)
REACH_HOME = np.array([0.0, np.pi / 16, 0.0, -np.pi / 2 - np.pi / 3, 0.0, np.pi - 0.2, np.pi / 4])


def random_pose(rng: np.random.Generator) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = rotvec_to_matrix(rng.normal(size=3))
    T[:3, 3] = rng.uniform(-0.5, 0.5, size=3)
    return T


@pytest.mark.sim
def test_grip_site_of_o_t_ee_is_the_mujoco_twins_grip_site() -> None:
    """At the same joints, the pose the libfranka backend derives from ``O_T_EE`` (numpy FK of
    the hand TCP, as libfranka computes it) is the sim backend's grip site, to numerical
    precision; the raw TCP is 6.9 mm and 90 degrees off."""
    pytest.importorskip("mujoco", reason="needs the sim extra")
    from robot_drivers.sim_arm import MujocoArmBackend

    twin = MujocoArmBackend()
    twin.connect()
    rng = np.random.default_rng(0)
    for q in [REACH_HOME, np.array(PANDA_HOME), *(REACH_HOME + rng.normal(0, 0.4, (4, 7)))]:
        twin.set_arm_pose(q)
        pose = twin.read_state().ee_pose
        site = np.eye(4)
        site[:3, :3] = quat_xyzw_to_matrix(pose.quat_xyzw)
        site[:3, 3] = pose.position
        tcp = forward_kinematics(q)
        assert np.allclose(grip_site_from_o_t_ee(tcp), site, atol=1e-9)
        assert np.linalg.norm(tcp[:3, 3] - site[:3, 3]) == pytest.approx(0.0069, abs=1e-4)
        turn = matrix_to_rotvec(tcp[:3, :3].T @ site[:3, :3])
        assert np.allclose(turn, [0.0, 0.0, -np.pi / 2], atol=1e-3)


def test_the_grip_site_does_not_depend_on_the_end_effector_set_in_desk() -> None:
    """The same flange pose with two ``F_T_EE`` settings (Desk's hand, or none) gives one grip
    site; and ``o_t_ee_from_grip_site`` inverts the conversion (impedance targets)."""
    rng = np.random.default_rng(1)
    for _ in range(5):
        o_t_f = random_pose(rng)
        for f_t_ee in (F_T_HAND_TCP, np.eye(4), random_pose(rng)):
            o_t_ee = o_t_f @ f_t_ee
            site = grip_site_from_o_t_ee(o_t_ee, f_t_ee)
            assert np.allclose(site, o_t_f @ F_T_GRIP_SITE, atol=1e-12)
            assert np.allclose(o_t_ee_from_grip_site(site, f_t_ee), o_t_ee, atol=1e-12)
