"""Panda / FR3 forward kinematics, Jacobian and a damped least-squares IK step in numpy.

Why here and not from the backend: the safety layer checks the end-effector workspace box
*before* a joint target is sent, and end-effector delta commands need IK on every backend
(sim and pylibfranka alike) without a model library. The Franka arm is a 7-joint chain with
published modified-DH parameters (Craig convention), so this is exact and cheap (~20 us).
Rotation conversions come from :mod:`rlinf_contracts.rotations` (one implementation, robust
near pi).

>>> import numpy as np
>>> T = forward_kinematics(np.array(PANDA_HOME))
>>> (np.round(T[:3, 3], 3) + 0.0).tolist()   # the well-known "ready" pose of the hand's TCP
[0.307, 0.0, 0.487]

The end-effector frame a policy sees (:data:`F_T_GRIP_SITE`) is not that TCP but the MuJoCo
twin's grip site, the frame every policy of this project is trained on; libfranka's ``O_T_EE``
is converted to it by :func:`grip_site_from_o_t_ee` (docs/real_franka.md, "End-effector frame").
"""

from __future__ import annotations

import numpy as np

# re-exported for rlinf_ros.nodes.robot until it imports it from rlinf_contracts.rotations itself
from rlinf_contracts.rotations import (
    orientation_error,
    quat_xyzw_to_matrix,  # noqa: F401
    rotvec_to_matrix,
)
from robot_drivers.types import PANDA_HOME  # noqa: F401  (doctest uses it)

# (a, d, alpha) per joint, modified DH; then the flange and the Franka Hand TCP offsets.
_DH = np.array(
    [
        [0.0, 0.333, 0.0],
        [0.0, 0.0, -np.pi / 2],
        [0.0, 0.316, np.pi / 2],
        [0.0825, 0.0, np.pi / 2],
        [-0.0825, 0.384, -np.pi / 2],
        [0.0, 0.0, np.pi / 2],
        [0.088, 0.0, np.pi / 2],
    ]
)
_FLANGE_D = 0.107
_HAND_TCP_D = 0.1034
_HAND_YAW = -np.pi / 4


# The end-effector frame of the robot spec's ``ee_pos`` / ``ee_rot6d`` (and of ArmState.ee_pose on
# every Panda backend: sim, libfranka, kinematic, bridge): the MuJoCo twin's
# ``gripper0_grip_site`` (robosuite's Panda hand, between the fingertips), in the flange frame
# (link 8, as ``tcp_d=0`` without the hand's yaw): 96.5 mm along z, turned -135.03 deg about z.
# libfranka's default ``O_T_EE`` (Desk's Franka Hand TCP, ``forward_kinematics``: 103.4 mm,
# -45 deg) lies 6.9 mm further out, turned +90.03 deg about z from it. Taken from the compiled
# MuJoCo scene (tests/robot_drivers/test_ee_frame.py checks both numbers against it).
GRIP_SITE_D = 0.0965
GRIP_SITE_YAW = -2.356687114568431


def _flange_to(d: float, yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    T = np.eye(4)
    T[:2, :2] = [[c, -s], [s, c]]
    T[2, 3] = d
    return T


F_T_GRIP_SITE = _flange_to(GRIP_SITE_D, GRIP_SITE_YAW)
"""Flange -> grip site (4x4)."""
F_T_HAND_TCP = _flange_to(_HAND_TCP_D, _HAND_YAW)
"""Flange -> the Franka Hand's TCP: libfranka's ``F_T_EE`` with Desk's default hand settings."""


EE_FRAMES: dict[str, np.ndarray] = {
    "hand_tcp": F_T_HAND_TCP,
    "flange": np.eye(4),
    "grip_site": F_T_GRIP_SITE,
}
"""Flange -> an end-effector frame a controller we do not own may use, by name. Why names: the
frame is set on the controller's side -- franka_ros2 reports and tracks libfranka's ``O_T_EE``,
whose ``F_T_EE`` is the end effector configured in Desk (``hand_tcp``: the Franka Hand's TCP,
also franka_description's ``fr3_hand_tcp`` link; ``flange``: no end effector, ``fr3_link8``),
CRISP its ``end_effector_frame`` parameter (one of those links) -- so a bridge names it in its
config and converts with :func:`grip_site_from_o_t_ee` / :func:`o_t_ee_from_grip_site`."""


def grip_site_fk(q: np.ndarray) -> np.ndarray:
    """Base -> grip site (4x4) at joints ``q``: the end-effector pose a policy sees, from the
    Panda forward kinematics (what the numpy-only backends report)."""
    return grip_site_from_o_t_ee(forward_kinematics(q))


def grip_site_from_o_t_ee(o_t_ee: np.ndarray, f_t_ee: np.ndarray = F_T_HAND_TCP) -> np.ndarray:
    """Base -> grip site (4x4) from libfranka's ``O_T_EE`` and ``F_T_EE`` (4x4 each): through the
    flange, so the result does not depend on the end effector configured in Desk.

    >>> q = np.array(PANDA_HOME)
    >>> site = grip_site_from_o_t_ee(forward_kinematics(q))
    >>> round(float(site[2, 3] - forward_kinematics(q)[2, 3]), 4)   # hand pointing down
    0.0069
    """
    return np.asarray(o_t_ee, dtype=np.float64) @ np.linalg.solve(f_t_ee, F_T_GRIP_SITE)


def o_t_ee_from_grip_site(site: np.ndarray, f_t_ee: np.ndarray = F_T_HAND_TCP) -> np.ndarray:
    """The inverse of :func:`grip_site_from_o_t_ee`: the ``O_T_EE`` at which the grip site is at
    ``site`` (e.g. an impedance target, given in the grip-site frame)."""
    return np.asarray(site, dtype=np.float64) @ np.linalg.solve(F_T_GRIP_SITE, f_t_ee)


def _mdh(a: float, d: float, alpha: float, theta: float) -> np.ndarray:
    ca, sa, ct, st = np.cos(alpha), np.sin(alpha), np.cos(theta), np.sin(theta)
    return np.array(
        [
            [ct, -st, 0.0, a],
            [st * ca, ct * ca, -sa, -d * sa],
            [st * sa, ct * sa, ca, d * ca],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )


def _tcp_offset(tcp_d: float) -> np.ndarray:
    c, s = np.cos(_HAND_YAW), np.sin(_HAND_YAW)
    T = np.eye(4)
    T[:2, :2] = [[c, -s], [s, c]]
    T[2, 3] = _FLANGE_D + tcp_d
    return T


def joint_frames(q: np.ndarray, tcp_d: float = _HAND_TCP_D) -> list[np.ndarray]:
    """Base->frame_i transforms for joints 1..7 (joint i turns about frame i's z) and the TCP."""
    frames, T = [], np.eye(4)
    for (a, d, alpha), theta in zip(_DH, np.asarray(q, dtype=np.float64)):
        T = T @ _mdh(a, d, alpha, theta)
        frames.append(T)
    frames.append(T @ _tcp_offset(tcp_d))
    return frames


def forward_kinematics(q: np.ndarray, tcp_d: float = _HAND_TCP_D) -> np.ndarray:
    """4x4 base->TCP transform (``tcp_d=0`` gives the flange, like libfranka's ``O_T_EE`` w/o
    hand)."""
    return joint_frames(q, tcp_d)[-1]


def jacobian(q: np.ndarray, tcp_d: float = _HAND_TCP_D) -> np.ndarray:
    """6x7 geometric Jacobian (linear rows first) of the TCP in the base frame."""
    frames = joint_frames(q, tcp_d)
    p_e = frames[-1][:3, 3]
    J = np.zeros((6, 7))
    for i in range(7):
        z, p = frames[i][:3, 2], frames[i][:3, 3]
        J[:3, i] = np.cross(z, p_e - p)
        J[3:, i] = z
    return J


def pose_error(T_now: np.ndarray, T_goal: np.ndarray) -> np.ndarray:
    """[dp (3), drot (3)] that moves ``T_now`` onto ``T_goal``, both in the base frame."""
    dp = T_goal[:3, 3] - T_now[:3, 3]
    drot = orientation_error(T_goal[:3, :3], T_now[:3, :3])
    return np.concatenate([dp, drot])


def solve_ik(
    q0: np.ndarray,
    T_goal: np.ndarray,
    iters: int = 20,
    damping: float = 1e-2,
    tol: float = 1e-5,
    tcp_d: float = _HAND_TCP_D,
) -> np.ndarray:
    """Damped least-squares IK from ``q0`` towards ``T_goal``; returns the best joints found.

    Small moves (end-effector delta commands of a few cm) converge in 2-4 iterations; the
    result is not clamped here: the safety layer does that with its own counters.
    """
    q = np.asarray(q0, dtype=np.float64).copy()
    for _ in range(iters):
        err = pose_error(forward_kinematics(q, tcp_d), T_goal)
        if np.linalg.norm(err) < tol:
            break
        J = jacobian(q, tcp_d)
        q += J.T @ np.linalg.solve(J @ J.T + damping**2 * np.eye(6), err)
    return q


def apply_ee_delta(q: np.ndarray, delta: np.ndarray, tcp_d: float = _HAND_TCP_D) -> np.ndarray:
    """Joint target realising an end-effector delta ``[dx, dy, dz, rx, ry, rz]`` (base frame)."""
    T = forward_kinematics(q, tcp_d)
    goal = T.copy()
    goal[:3, 3] += np.asarray(delta[:3])
    goal[:3, :3] = rotvec_to_matrix(np.asarray(delta[3:6])) @ T[:3, :3]
    return solve_ik(q, goal, tcp_d=tcp_d)


def lift_first(
    q: np.ndarray, goal: np.ndarray, lift: float = 0.05, samples: int = 20
) -> np.ndarray:
    """The next joint target of a move from ``q`` to ``goal`` (e.g. an episode reset) that never
    sweeps the hand down: ``goal`` itself when the straight joint path keeps the TCP at or above
    the lower of its two ends, else ``q`` with the TCP raised by ``lift`` m (orientation kept).

    Why: from a tilted hand the straight joint path home can dip 10-15 cm below both ends -- into
    the table, and through the safety layer's workspace floor, which stops the arm on the floor
    for good (every re-planned path dips again). Re-planned from where the arm is (the task node
    re-sends its reset every 0.1 s), this lifts until the straight path is clear, then goes.

    >>> q = np.array(PANDA_HOME)
    >>> bool(np.array_equal(lift_first(q, q + 0.1), q + 0.1))   # a short move: straight
    True
    """
    q = np.asarray(q, dtype=np.float64)
    goal = np.asarray(goal, dtype=np.float64)
    z = [forward_kinematics(q + s * (goal - q))[2, 3] for s in np.linspace(0.0, 1.0, samples + 1)]
    if min(z) >= min(z[0], z[-1]) - 1e-3:
        return goal
    up = forward_kinematics(q)
    up[2, 3] += lift
    return solve_ik(q, up)
