"""Peg insertion (mujoco_franka/insert) under ee_impedance and position control: stepping,
torque actuation, the oracle, reward / success semantics, contact force, gain config errors."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.env_registry import make_env
from rlinf_contracts.impedance import ImpedanceGains
from sim_bridges.mujoco_franka import FrankaVectorEnv, oracle_action
from sim_bridges.mujoco_franka.tasks.insert import (
    HOLE_DEPTH,
    HOLE_HALF,
    PEG_HALF_WIDTH,
    SUCCESS_DEPTH,
    insert_reward,
)


def _env(num_envs: int = 1, **kw: object) -> FrankaVectorEnv:
    env = make_env("mujoco_franka/insert", num_envs=num_envs, **kw)
    assert isinstance(env, FrankaVectorEnv)
    return env


def _run_oracle(env: FrankaVectorEnv, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One episode per env: (success [B], peak contact force [B])."""
    env.reset(seed=seed)
    b = env.num_envs
    success, peak, done = np.zeros(b, bool), np.zeros(b), np.zeros(b, bool)
    while not done.all():
        _, _, term, trunc, info = env.step(oracle_action(env))
        ended = (term | trunc) & ~done
        success[ended] = info["success"][ended]
        peak[ended] = info["peak_contact_force"][ended]
        done |= ended
    return success, peak


def test_clearance_is_at_most_two_millimetres() -> None:
    assert 0 < 2 * (HOLE_HALF - PEG_HALF_WIDTH) <= 0.002 + 1e-12


def test_impedance_env_is_torque_actuated_and_holds_still() -> None:
    env = _env(control="ee_impedance")
    spec = env.spec.robot
    assert spec is not None and spec.action.control == "ee_impedance"
    assert spec.action.impedance == ImpedanceGains()
    assert env.spec.action_dim == 4 and env.spec.state_dim == 24 + 6
    fm = env.fms[0]
    m = fm.model
    assert all(m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE for a in fm.arm_act)
    assert not m.body_gravcomp.any()  # the torque loop adds qfrc_bias instead
    obs = env.reset(seed=3)
    start = obs["state"][0, :3].copy()
    hold = np.zeros((1, 4), np.float32)
    hold[0, 3] = -0.4  # fingers on the peg
    for _ in range(20):
        obs, *_ = env.step(hold)
    # gravity-compensated and spring-held: the end effector stays within half a millimetre
    assert np.abs(obs["state"][0, :3] - start).max() < 5e-4
    assert np.abs(env._impedance.tau[0]).max() < 5.0  # type: ignore[union-attr]  # set above


def test_impedance_action_moves_the_target() -> None:
    env = _env(control="ee_impedance")
    obs = env.reset(seed=0)
    start = obs["state"][0, :3].copy()
    up = np.array([[0.0, 0.0, 0.2, -0.4]], np.float32)  # target 1 cm above (pos_scale 5 cm)
    for _ in range(5):
        obs, *_ = env.step(up)
    # the target is re-anchored on the measured pose every step: the spring pulls 10 N against
    # the damper, ~D / K per step behind a position-controlled arm, never beyond 5 x 1 cm
    rise = obs["state"][0, 2] - start[2]
    assert 0.01 < rise < 0.05
    # mostly vertical: a plain impedance law does not shape the arm's inertia, so a vertical
    # pull also moves the end effector a little sideways
    assert np.linalg.norm(obs["state"][0, :2] - start[:2]) < 0.25 * rise


def test_oracle_inserts_with_impedance_control() -> None:
    success, peak = _run_oracle(_env(10, control="ee_impedance"), seed=0)
    assert success.sum() >= 8, success
    assert (peak[success] >= 0).all() and peak.max() > 0  # the peg touched the fixture


def test_oracle_inserts_with_position_control() -> None:
    success, _ = _run_oracle(_env(10, control="ee_delta_pos"), seed=0)
    assert success.sum() >= 8, success


def test_reward_and_success_semantics() -> None:
    hole = np.array([[0.1, 0.2, HOLE_DEPTH]])
    above = hole + [[0.003, 0.004, 0.01]]  # 5 mm off the axis, 1 cm above the top
    ok, r = insert_reward(above, hole)
    assert not ok[0] and r[0] == pytest.approx(-(2 * 0.005 + 0.01 + SUCCESS_DEPTH))
    deep = hole + [[0.0, 0.0, -SUCCESS_DEPTH - 0.001]]
    ok, r = insert_reward(deep, hole)
    assert ok[0] and r[0] == 0.0
    beside = hole + [[0.03, 0.0, -SUCCESS_DEPTH - 0.001]]  # deep enough, but not in the hole
    ok, _ = insert_reward(beside, hole)
    assert not ok[0]


def test_doing_nothing_never_succeeds_nor_touches() -> None:
    env = _env(2, control="ee_impedance", max_episode_steps=10)
    env.reset(seed=1)
    idle = np.tile(np.array([0.0, 0.0, 0.0, -0.4], np.float32), (2, 1))
    for _ in range(10):
        _, reward, term, trunc, info = env.step(idle)
        assert not info["success"].any() and (reward < 0).all()
    assert trunc.all() and not term.any()
    np.testing.assert_array_equal(info["peak_contact_force"], 0.0)


def test_bad_gain_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"env\.kwargs\.impedance\.stiffness_pos"):
        _env(control="ee_impedance", impedance={"stiffness_pos": -100.0})
    with pytest.raises(ConfigError, match="unknown key"):
        _env(control="ee_impedance", impedance={"kp": 100.0})
    with pytest.raises(ConfigError, match="ee_impedance only"):
        _env(control="ee_delta_pos", impedance={"stiffness_pos": 500.0})
    env = _env(control="ee_impedance", impedance={"stiffness_pos": 500.0})
    assert env.spec.robot is not None and env.spec.robot.action.impedance is not None
    assert env.spec.robot.action.impedance.stiffness_pos == 500.0
