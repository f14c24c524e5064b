"""ee_impedance on the robot side with the MuJoCo arm: the impedance law tracks a target pose in
the backend's physics loop, and safety (workspace box, watchdog, e-stop) stays in the path."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.rotations import quat_xyzw_to_matrix
from robot_drivers.arm import FrankaArm
from robot_drivers.factory import ArmConfig, make_arm
from robot_drivers.impedance_law import CartesianImpedanceLaw
from robot_drivers.safety import SafetyConfig


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def sim_arm(watchdog_ms: float = 200.0) -> tuple[FrankaArm, _Clock]:
    arm = make_arm(
        ArmConfig(
            backend="sim", control="ee_impedance", safety=SafetyConfig(watchdog_ms=watchdog_ms)
        )
    )
    arm.connect()
    clock = _Clock()
    arm._clock = arm.safety._clock = clock  # simulated time, as the robot node's sim_clock
    return arm, clock


def run(arm: FrankaArm, clock: _Clock, seconds: float, send: Callable[[], object] | None = None):
    backend = arm.backend
    dt = float(backend.fm.model.opt.timestep)  # type: ignore[attr-defined]  # the MuJoCo arm's
    for _ in range(round(seconds / 0.01)):
        if send is not None:
            send()
        clock.t += 0.01
        backend.step(round(0.01 / dt))  # type: ignore[attr-defined]  # the concrete backend's attribute
        arm.tick(clock.t)


def pose_of(arm: FrankaArm) -> np.ndarray:
    st = arm.state()
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = quat_xyzw_to_matrix(st.ee_pose.quat_xyzw), st.ee_pose.position
    return pose


def test_tracks_a_target_pose_then_the_watchdog_hands_back_to_position_control() -> None:
    arm, clock = sim_arm()
    start = pose_of(arm)
    goal = start.copy()
    goal[:3, 3] += [0.03, -0.02, 0.04]
    run(arm, clock, 1.5, lambda: arm.track_pose(goal, issued_at=clock.t))
    assert arm.backend.control_mode == "torque"  # type: ignore[attr-defined]  # the concrete backend's attribute
    reached = pose_of(arm)
    assert np.linalg.norm(reached[:3, 3] - goal[:3, 3]) < 2e-3
    assert np.allclose(reached[:3, :3], start[:3, :3], atol=1e-2)
    run(arm, clock, 0.5)  # the sender went quiet: the watchdog holds, in position control
    assert arm.counters["stale_hold"] == 1 and arm.holding
    assert arm.backend.control_mode == "position"  # type: ignore[attr-defined]  # the concrete backend's attribute
    held = pose_of(arm)[:3, 3]
    run(arm, clock, 0.5)
    assert np.linalg.norm(pose_of(arm)[:3, 3] - held) < 1e-3


def test_targets_are_clamped_into_the_workspace_box() -> None:
    arm, clock = sim_arm()
    goal = pose_of(arm)
    goal[:3, 3] = [0.5, 0.0, -0.5]  # below the table
    out = arm.track_pose(goal, issued_at=clock.t)
    assert out.events == ("workspace",)
    assert out.target[2, 3] == pytest.approx(arm.safety.cfg.workspace_min[2])
    run(arm, clock, 1.0, lambda: arm.track_pose(goal, issued_at=clock.t))
    assert pose_of(arm)[2, 3] > arm.safety.cfg.workspace_min[2] - 2e-3


def test_estop_ends_the_torque_loop_and_refuses_targets() -> None:
    arm, clock = sim_arm()
    goal = pose_of(arm)
    goal[2, 3] += 0.05
    run(arm, clock, 0.1, lambda: arm.track_pose(goal, issued_at=clock.t))
    assert arm.backend.control_mode == "torque"  # type: ignore[attr-defined]  # the concrete backend's attribute
    arm.estop("test")
    assert arm.backend.control_mode == "position"  # type: ignore[attr-defined]  # the concrete backend's attribute
    out = arm.track_pose(goal, issued_at=clock.t)
    assert out.refused and "e-stop" in out.reason
    stopped = pose_of(arm)[:3, 3]
    run(arm, clock, 0.5)
    assert np.linalg.norm(pose_of(arm)[:3, 3] - stopped) < 2e-3
    assert arm.track_pose(np.full((4, 4), np.nan)).refused  # still latched; never reaches a law


def test_stale_and_non_finite_targets_are_refused() -> None:
    arm, clock = sim_arm()
    clock.t = 10.0
    assert "stale_refused" in arm.track_pose(pose_of(arm), issued_at=9.0).events
    arm.reset_estop()
    assert "non_finite" in arm.track_pose(np.full((4, 4), np.nan)).events
    with pytest.raises(ValueError, match="4x4"):
        CartesianImpedanceLaw(arm.impedance, np.zeros(7), np.eye(3))  # type: ignore[arg-type]  # a wrong argument on purpose


@pytest.mark.parametrize("backend", ["kinematic", "bridge"])
def test_backends_without_a_torque_loop_refuse_ee_impedance(backend: str) -> None:
    with pytest.raises(ConfigError, match=r"robot.arms\[arm\].control.*torque loop"):
        make_arm(ArmConfig(backend=backend, control="ee_impedance"))


def test_unknown_control_and_bad_gains_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"robot.arms\[arm\].control"):
        make_arm(ArmConfig(backend="sim", control="torque"))
    with pytest.raises(ConfigError, match=r"robot.arms\[arm\].impedance.max_force"):
        make_arm(ArmConfig(backend="sim", control="ee_impedance", impedance={"max_force": 0.0}))
