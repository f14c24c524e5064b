"""The lock-step twin keeps the datasheet limits at every physics step, not only where a control
step ends: the simulator's step-shaped target made the servo peak mid-step (joint 7 at 1.09 x its
speed limit on a joint 1 + joint 7 reversal at ``velocity_scale`` 1.0, reading 0.89 at the ends of
the control steps). A command that would leave the limits is shortened; a joint driven past them
anyway e-stops the arm."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="needs the sim extra")

from robot_drivers.factory import ArmConfig, make_arm
from robot_drivers.lockstep import LockstepStepper
from robot_drivers.types import PANDA_DQ_MAX, PANDA_Q_MAX, PANDA_Q_MIN

pytestmark = [pytest.mark.sim]

ROOT = Path(__file__).resolve().parents[2]
Q_MIN, Q_MAX, DQ_MAX = np.array(PANDA_Q_MIN), np.array(PANDA_Q_MAX), np.array(PANDA_DQ_MAX)


class PhysicsProbe:
    """Stands in for the ``mujoco`` module of an arm backend: records the arm's joints after every
    physics step of its data; steps undone by restoring an earlier state are forgotten, so
    :attr:`states` is the trajectory the arm really went through."""

    def __init__(self, mj: Any, data: Any, qpos: Any, dof: Any) -> None:
        self._mj, self._data, self._qpos, self._dof = mj, data, qpos, dof
        self.states: list[tuple[np.ndarray, np.ndarray]] = []
        self._saved: dict[int, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mj, name)

    def _record(self, d: Any) -> None:
        if d is self._data:
            self.states.append((d.qpos[self._qpos].copy(), d.qvel[self._dof].copy()))

    def mj_step(self, m: Any, d: Any, nstep: int = 1) -> None:
        for _ in range(nstep):
            self._mj.mj_step(m, d)
            self._record(d)

    def mj_step2(self, m: Any, d: Any) -> None:
        self._mj.mj_step2(m, d)
        self._record(d)

    def mj_getState(self, m: Any, d: Any, state: np.ndarray, spec: Any) -> None:
        self._mj.mj_getState(m, d, state, spec)
        if d is self._data:
            self._saved[id(state)] = len(self.states)

    def mj_setState(self, m: Any, d: Any, state: np.ndarray, spec: Any) -> None:
        self._mj.mj_setState(m, d, state, spec)
        if d is self._data:
            del self.states[self._saved[id(state)] :]

    def peak_speed_ratio(self) -> float:
        return max(float(np.max(np.abs(dq) / DQ_MAX)) for _, dq in self.states)

    def position_excess(self) -> float:
        """Furthest (rad) any joint went past a position limit (<= 0: never)."""
        return max(float(np.max(np.maximum(q - Q_MAX, Q_MIN - q))) for q, _ in self.states)


@pytest.fixture
def twin() -> Iterator[tuple[Any, LockstepStepper, PhysicsProbe]]:
    """The language twin with the safety settings of configs/ros_sim_franka_language.yaml (full
    joint speed), stepped in lock-step, its physics watched by a probe. Closed afterwards: an
    env's camera rig left to the garbage collector disturbs the GL context of later renders."""
    from rlinf_ros.config import load_graph_config

    safety = load_graph_config(ROOT / "configs/ros_sim_franka_language.yaml").robot.arms[0].safety
    assert safety.velocity_scale == 1.0
    arm = make_arm(
        ArmConfig(name="panda", scene="franka_language/mix", scene_seed=0, safety=safety)
    )
    arm.connect()
    try:
        arm.backend.new_episode(1)
        stepper = LockstepStepper(arm)
        b = arm.backend
        probe = PhysicsProbe(b._mj, b.data, b.fm.arm_qpos, b.fm.arm_dof)
        b._mj = probe
        yield arm, stepper, probe
    finally:
        arm.disconnect()
        arm.backend.scene.close()


def test_joint1_and_7_reversal_stays_within_the_limits_at_every_physics_step(
    twin: tuple[Any, LockstepStepper, PhysicsProbe],
) -> None:
    """Joints 1 and 7 (parallel in the home pose) commanded to +-10 rad, reversed after 7 steps:
    before the fix joint 7 peaked at 1.09 x its speed limit between control steps."""
    arm, stepper, probe = twin
    home = arm.state().q.copy()
    sampled = 0.0  # what a check once per control period reads
    for k in range(20):
        sign = 1.0 if k < 7 else -1.0
        q = home.copy()
        q[0], q[6] = 10.0 * sign, -10.0 * sign
        out = stepper.apply(q, None)
        assert not out.refused, out.reason
        sampled = max(sampled, float(np.max(np.abs(arm.state().dq) / DQ_MAX)))
    assert len(probe.states) == 20 * stepper.substeps
    peak, excess = probe.peak_speed_ratio(), probe.position_excess()
    print(f"peak |qd| / limit at the physics steps {peak:.4f}, at the control steps {sampled:.4f}")
    assert peak <= 1.0, f"peak |qd| = {peak:.4f} x dq_max between two control steps"
    assert excess <= 0.0, f"{excess:.4f} rad past a position limit"
    assert not arm.safety.estopped and arm.counters.get("limit_violation", 0) == 0
    assert arm.counters["position_limit"] > 0  # the commands really asked for more
    assert sampled > 0.8  # still moving near full speed: shortened, not stopped


def test_a_command_within_the_limits_runs_the_simulator_step_unchanged(
    twin: tuple[Any, LockstepStepper, PhysicsProbe],
) -> None:
    arm, stepper, probe = twin
    q = arm.state().q + 0.02
    out = stepper.apply(q, None)
    assert not out.refused and "substep_limit" not in out.events
    assert np.array_equal(arm.backend.data.ctrl[arm.backend.fm.arm_act], out.target)
    assert len(probe.states) == stepper.substeps and probe.peak_speed_ratio() < 0.5
    assert "substep_limit" not in arm.counters


def test_a_joint_driven_past_its_limit_within_a_control_step_estops_the_arm(
    twin: tuple[Any, LockstepStepper, PhysicsProbe],
) -> None:
    """An outside torque on joint 7 no shorter move can hold: the step runs (holding still), its
    physics steps are checked and the arm is e-stopped through the measured-state counters."""
    arm, stepper, probe = twin
    b = arm.backend
    b.data.qfrc_applied[b.fm.arm_dof[6]] = 400.0
    out = stepper.apply(arm.state().q, None)
    assert not out.refused and "substep_limit" in out.events
    assert arm.safety.estopped and arm.counters["limit_violation"] == 1
    assert "joint 7" in arm.safety.estop_refusal()
    assert stepper.apply(arm.state().q, None).refused
