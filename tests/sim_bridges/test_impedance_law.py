"""The Cartesian impedance law (rlinf_contracts.impedance): exact values, limits, gain config,
and the ``ee_impedance`` action space in the robot spec."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.control import ActionDecoder
from rlinf_contracts.impedance import (
    ImpedanceGains,
    impedance_torques,
    nullspace_projector,
    step_target,
)
from rlinf_contracts.spec import ActionSpace, RobotSpec, SpecError, StateField

EYE = np.eye(3)
HOME = np.array([0.1, -0.2, 0.3, -2.0, 0.1, 1.8, 0.7])
# a Jacobian whose first 6 joints move the 6 task coordinates one to one, joint 7 nothing:
# the null space is exactly joint 7 (with an undamped pseudo-inverse)
J_SPLIT = np.hstack([np.eye(6), np.zeros((6, 1))])


def _tau(gains: ImpedanceGains, **kw: object) -> np.ndarray:
    args: dict = dict(
        q=HOME,
        dq=np.zeros(7),
        pos=np.zeros(3),
        rot=EYE,
        jac=J_SPLIT,
        target_pos=np.zeros(3),
        target_rot=EYE,
        home=HOME,
    )
    args.update(kw)
    return impedance_torques(gains, **args)


def test_zero_error_at_home_is_zero_torque() -> None:
    np.testing.assert_array_equal(_tau(ImpedanceGains()), np.zeros(7))


def test_zero_error_leaves_only_the_nullspace_pull() -> None:
    gains = ImpedanceGains(nullspace_stiffness=5.0, pinv_damping=0.0)
    q = HOME + np.array([0.1, 0.2, -0.1, 0.05, 0.3, -0.2, 0.4])
    tau = _tau(gains, q=q)
    np.testing.assert_allclose(tau, [0, 0, 0, 0, 0, 0, 5.0 * -0.4], atol=1e-12)


def test_spring_and_critical_damping() -> None:
    gains = ImpedanceGains(stiffness_pos=400.0, nullspace_stiffness=0.0)
    assert gains.damping_pos == 40.0 and gains.nullspace_damping == 0.0
    dq = np.array([0.0, 0.01, 0, 0, 0, 0, 0])  # EE moving +1 cm/s along y
    tau = _tau(gains, target_pos=np.array([0.02, 0.0, 0.0]), dq=dq)
    np.testing.assert_allclose(tau, [400.0 * 0.02, -40.0 * 0.01, 0, 0, 0, 0, 0], atol=1e-12)


def test_rotation_error_gives_a_moment() -> None:
    gains = ImpedanceGains(stiffness_rot=50.0, nullspace_stiffness=0.0)
    a = 0.1
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    tau = _tau(gains, target_rot=rz)
    np.testing.assert_allclose(tau, [0, 0, 0, 0, 0, 50.0 * a, 0], atol=1e-12)


def test_wrench_clamp_keeps_direction() -> None:
    gains = ImpedanceGains(max_force=40.0, max_moment=2.0, nullspace_stiffness=0.0)
    tau = _tau(gains, target_pos=np.array([0.3, 0.4, 0.0]))  # 1000 N/m x 0.5 m = 500 N
    np.testing.assert_allclose(tau, [24.0, 32.0, 0, 0, 0, 0, 0], atol=1e-12)
    ry = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # 90 deg about y
    tau = _tau(gains, target_rot=ry)
    np.testing.assert_allclose(tau, [0, 0, 0, 0, 2.0, 0, 0], atol=1e-12)


def test_joint_torque_clamp() -> None:
    gains = ImpedanceGains(max_force=1e4, nullspace_stiffness=0.0)
    jac = np.zeros((6, 7))
    jac[0, 4] = 1.0  # x moves joint 5 (12 Nm limit)
    jac[1, 0] = 1.0  # y moves joint 1 (87 Nm)
    tau = _tau(gains, jac=jac, target_pos=np.array([0.05, 0.2, 0.0]))
    np.testing.assert_allclose(tau, [87.0, 0, 0, 0, 12.0, 0, 0], atol=1e-12)


def test_torque_rate_limit_per_cycle() -> None:
    gains = ImpedanceGains(nullspace_stiffness=0.0)  # 1000 Nm/s: 1 Nm per 1 ms cycle
    prev = np.array([0.0, 5.0, 0, 0, 0, 0, 0])
    tau = _tau(gains, target_pos=np.array([0.01, 0.004, 0.0]), tau_prev=prev, dt=0.001)
    np.testing.assert_allclose(tau, [1.0, 4.0, 0, 0, 0, 0, 0], atol=1e-12)
    off = ImpedanceGains(nullspace_stiffness=0.0, max_torque_rate=0.0)
    tau = _tau(off, target_pos=np.array([0.01, 0.0, 0.0]), tau_prev=prev, dt=0.001)
    np.testing.assert_allclose(tau, [10.0, 0, 0, 0, 0, 0, 0], atol=1e-12)


def test_batched_equals_rowwise_and_mass_projector_is_dynamically_consistent() -> None:
    rng = np.random.default_rng(0)
    b = 4
    jac = rng.normal(size=(b, 6, 7))
    a = rng.normal(size=(b, 7, 7))
    mass = a @ np.swapaxes(a, 1, 2) + 7 * np.eye(7)
    kw: dict[str, Any] = dict(
        q=HOME + rng.normal(0, 0.1, (b, 7)),
        dq=rng.normal(0, 0.1, (b, 7)),
        pos=rng.normal(0, 0.01, (b, 3)),
        rot=np.tile(EYE, (b, 1, 1)),
        jac=jac,
        target_pos=np.zeros((b, 3)),
        target_rot=np.tile(EYE, (b, 1, 1)),
        home=HOME,
        mass=mass,
    )
    batched = impedance_torques(ImpedanceGains(), **kw)
    for i in range(b):
        one = {k: v if k == "home" else v[i] for k, v in kw.items()}
        np.testing.assert_allclose(impedance_torques(ImpedanceGains(), **one), batched[i])
    proj = nullspace_projector(jac, mass)
    # null-space torques cause no end-effector acceleration: J M^-1 N tau = 0
    tau = rng.normal(size=(b, 7, 1))
    acc = jac @ np.linalg.solve(mass, proj @ tau)
    np.testing.assert_allclose(acc, 0.0, atol=1e-9)


def test_step_target_is_relative_to_the_measured_pose() -> None:
    got = step_target(np.array([0.1, 0.2, 0.3]), np.array([1.0, -2.0, 0.5]), 0.02)
    np.testing.assert_allclose(got, [0.12, 0.18, 0.31])


@pytest.mark.parametrize(
    ("gains", "key"),
    [
        ({"stiffness_pos": -1.0}, "action.impedance.stiffness_pos"),
        ({"damping_rot": float("nan")}, "action.impedance.damping_rot"),
        ({"max_force": 0.0}, "action.impedance.max_force"),
        ({"joint_torque_limits": [87.0] * 6}, "action.impedance.joint_torque_limits"),
        ({"stifness_pos": 10.0}, "stiffness_pos"),  # the unknown key lists the known ones
    ],
)
def test_bad_gains_are_config_errors_naming_the_key(gains: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ImpedanceGains.from_dict(gains)


def test_spec_carries_the_gains() -> None:
    space = ActionSpace("ee_impedance", 4)
    assert space.impedance == ImpedanceGains()
    spec = RobotSpec(state=(StateField("ee_pos", 3),), action=space)
    assert RobotSpec.from_dict(spec.to_dict()) == spec
    softer = RobotSpec(
        state=spec.state,
        action=ActionSpace("ee_impedance", 4, impedance=ImpedanceGains(stiffness_pos=300.0)),
    )
    (diff,) = spec.mismatches(softer)
    assert "stiffness=1000/60" in diff and "stiffness=300/60" in diff
    # other modes' specs keep their layout (no impedance key)
    assert "impedance" not in RobotSpec(state=spec.state).to_dict()["action"]
    with pytest.raises(ConfigError, match="stiffness_rot"):
        ActionSpace("ee_impedance", 4, impedance={"stiffness_rot": -3.0})  # type: ignore[arg-type]  # a map from the wire


def test_position_decoder_refuses_impedance_actions() -> None:
    with pytest.raises(SpecError, match="torque loop"):
        ActionDecoder(ActionSpace("ee_impedance", 4), HOME)
