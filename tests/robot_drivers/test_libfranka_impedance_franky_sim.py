"""ee_impedance on the libfranka backend against franky-sim: the Cartesian impedance law runs in
the 1 kHz torque loop, tracks a target pose a few cm away, and the watchdog (a silent sender)
hands the arm back to position control, holding (a module of its own: franky-sim serves one
client, so this arm with its gains gets a server of its own)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from rlinf_contracts.rotations import quat_xyzw_to_matrix
from robot_drivers.arm import FrankaArm
from robot_drivers.factory import ArmConfig, make_arm
from robot_drivers.safety import SafetyConfig
from robot_drivers.types import PANDA_HOME
from tests.robot_drivers.franky_sim import FrankySim, franky_sim  # noqa: F401 -- fixture
from tests.robot_drivers.test_libfranka_franky_sim import drive_to, wait_for


@pytest.fixture(scope="module")
def arm(franky_sim: FrankySim) -> Iterator[FrankaArm]:  # noqa: F811 -- the fixture above
    cfg = ArmConfig(
        name="fr3",
        backend="libfranka",
        ip=franky_sim.host,
        realtime="ignore",
        joint_prefix="fr3_",
        safety=SafetyConfig(watchdog_ms=200.0),
        control="ee_impedance",
        impedance={"stiffness_pos": 600.0, "stiffness_rot": 40.0, "nullspace_stiffness": 5.0},
    )
    a = make_arm(cfg)
    a.connect()
    yield a
    a.disconnect()


def pose_of(arm: FrankaArm) -> np.ndarray:
    st = arm.state()
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = quat_xyzw_to_matrix(st.ee_pose.quat_xyzw), st.ee_pose.position
    return pose


def test_impedance_law_tracks_a_target_pose_and_hands_back_on_hold(arm: FrankaArm) -> None:
    backend = arm.backend
    drive_to(arm, np.array(PANDA_HOME))
    start = pose_of(arm)
    goal = start.copy()
    goal[:3, 3] += [0.03, 0.02, -0.03]

    def tracked() -> bool:  # the target re-sent every tick, as the robot node forwards a policy's
        out = arm.track_pose(goal, issued_at=arm.now())
        assert not out.refused, out.reason
        return float(np.linalg.norm(pose_of(arm)[:3, 3] - goal[:3, 3])) < 5e-3

    wait_for(tracked, f"the end effector at {np.round(goal[:3, 3], 3).tolist()}")
    assert backend.control_mode == "torque"  # type: ignore[attr-defined]  # the concrete backend's attribute
    assert np.allclose(pose_of(arm)[:3, :3], start[:3, :3], atol=0.05)
    stale = arm.counters.get("stale_hold", 0)
    wait_for(
        lambda: backend.control_mode == "position",  # type: ignore[attr-defined]  # the concrete backend's attribute
        "the watchdog's hand-back",
        arm,
    )
    assert arm.counters["stale_hold"] == stale + 1 and arm.state().errors == ()
    held = pose_of(arm)[:3, 3]
    assert np.linalg.norm(held - goal[:3, 3]) < 1e-2
    drive_to(arm, np.array(PANDA_HOME))  # position control works again
