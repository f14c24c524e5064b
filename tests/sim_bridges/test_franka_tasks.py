"""MuJoCo Franka tasks: success is reachable, rewards and controls behave, options are checked."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts.env_registry import UnknownEnvError, make_env
from sim_bridges.mujoco_franka import TASKS, FrankaVectorEnv, oracle_action

pytestmark = pytest.mark.sim


def run_oracle(env: FrankaVectorEnv, episodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Step the oracle until ``episodes`` episodes finished; (success flags, returns)."""
    env.reset(seed=100)
    succ, rets = [], []
    for _ in range(20 * env.spec.max_episode_steps):
        _, _, term, trunc, info = env.step(oracle_action(env))
        done = term | trunc
        succ += info["success"][done].tolist()
        rets += info["episode_return"][done].tolist()
        if len(succ) >= episodes:
            break
    return np.array(succ[:episodes]), np.array(rets[:episodes])


@pytest.mark.parametrize(
    "task,control",
    [
        ("reach", "ee_delta"),
        ("reach", "joint_delta"),
        ("push", "ee_delta"),
        ("lift", "ee_delta"),
        ("lift", "joint_delta"),
    ],
)
def test_oracle_solves_task(task: str, control: str) -> None:
    env = make_env(f"mujoco_franka/{task}", num_envs=4, control=control)
    succ, _ = run_oracle(env, episodes=8)
    assert succ.mean() >= 0.9, f"{task}/{control}: oracle success {succ.mean():.2f}"


def test_random_policy_rarely_succeeds_and_gets_lower_return() -> None:
    env = make_env("mujoco_franka/reach", num_envs=8)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    succ, rets = [], []
    for _ in range(env.spec.max_episode_steps):
        _, _, term, trunc, info = env.step(rng.uniform(-1, 1, (8, env.spec.action_dim)))
        done = term | trunc
        succ += info["success"][done].tolist()
        rets += info["episode_return"][done].tolist()
    _, oracle_rets = run_oracle(make_env("mujoco_franka/reach", num_envs=8), episodes=8)
    assert np.mean(succ) < 0.5
    assert np.mean(oracle_rets) > np.mean(rets)


def test_lift_really_lifts_the_object() -> None:
    env = make_env("mujoco_franka/lift", num_envs=2)
    env.reset(seed=5)
    z0 = env.task.features(env.fms[0], env.datas[0], env.ee_positions()[0])[2]
    for _ in range(env.spec.max_episode_steps):
        _, _, term, _, info = env.step(oracle_action(env))
        if term[0]:
            final = info["final_observation"]["state"][0]
            assert final[-1] > 0.1  # height gained by the object (last task feature)
            assert final[24 + 2] > z0 + 0.1
            return
    pytest.fail("lift oracle never succeeded in env 0")


def test_sparse_reward_is_success_indicator() -> None:
    env = make_env("mujoco_franka/reach", num_envs=4, reward="sparse")
    env.reset(seed=0)
    for _ in range(30):
        _, rew, _, _, info = env.step(oracle_action(env))
        np.testing.assert_array_equal(rew, info["success"].astype(np.float32))


def test_shaped_reward_is_success_plus_potential_change_and_restarts_on_autoreset() -> None:
    """``reward=shaped``: ``ok + k (phi_t - phi_{t-1})`` with ``phi = -distance`` on reach, the
    previous potential being that of the last returned observation -- after an autoreset, the
    new episode's start, not the old episode's end (else a group's returns would mix episodes)."""
    from sim_bridges.mujoco_franka.config import SHAPING_SCALE

    env = make_env("mujoco_franka/reach", num_envs=4, reward="shaped")
    obs = env.reset(seed=3)
    phi = lambda state: -np.linalg.norm(state[:, -3:], axis=1)  # noqa: E731  (target - ee)
    rng, resets = np.random.default_rng(0), 0
    for _ in range(60):
        before = phi(obs["state"])
        obs, rew, term, trunc, info = env.step(oracle_action(env, noise=0.3, rng=rng))
        after = phi(obs["state"])
        done = term | trunc
        if done.any():
            after[done] = phi(info["final_observation"]["state"][done])
            resets += int(done.sum())
        np.testing.assert_allclose(
            rew, info["success"] + SHAPING_SCALE * (after - before), atol=1e-5
        )
    assert resets >= 4  # the check covered autoresets


def test_dense_reach_reward_is_minus_distance() -> None:
    env = make_env("mujoco_franka/reach", num_envs=3, terminate_on_success=False)
    env.reset(seed=1)
    obs, rew, _, _, info = env.step(np.zeros((3, 7), np.float32))
    dist = np.linalg.norm(obs["state"][:, -3:], axis=1)  # target - ee features
    np.testing.assert_allclose(rew, -dist + info["success"], atol=1e-5)


def test_ee_delta_moves_the_end_effector_as_commanded() -> None:
    env = make_env(
        "mujoco_franka/reach", num_envs=2, control="ee_delta_pos", terminate_on_success=False
    )
    env.reset(seed=2)
    start = env.ee_positions()
    act = np.array([[1.0, 0, 0, 1], [0, -1.0, 0, 1]], np.float32)
    # 5 steps (4 before the joint-speed limit): the arm now moves no faster than a real Franka
    for _ in range(5):
        env.step(act)
    moved = env.ee_positions() - start
    scale = env.control.pos_scale
    # the joint impedance lags the command a little: >= 50% of it within 4 steps, little drift
    assert 2 * scale < moved[0, 0] < 4.4 * scale and np.abs(moved[0, 1:]).max() < 0.03
    assert -4.4 * scale < moved[1, 1] < -2 * scale and np.abs(moved[1, [0, 2]]).max() < 0.03


def test_joint_delta_moves_joints() -> None:
    env = make_env("mujoco_franka/reach", num_envs=1, control="joint_delta")
    obs0 = env.reset(seed=0)["state"][0, 9:16]
    act = np.zeros((1, 8), np.float32)
    act[0, 0] = 1.0
    for _ in range(3):
        obs, *_ = env.step(act)
    dq = obs["state"][0, 9:16] - obs0
    scale = env.control.joint_scale  # the joint impedance lags: at least half of the command
    assert 1.5 * scale < dq[0] < 3.3 * scale
    assert np.all(np.abs(dq[1:]) < 0.05)


def test_gripper_closes_and_opens() -> None:
    env = make_env("mujoco_franka/reach", num_envs=1, terminate_on_success=False)
    env.reset(seed=0)
    for grip, expect in ((-1.0, 0.0), (1.0, 0.08)):
        for _ in range(8):
            obs, *_ = env.step(np.array([[0, 0, 0, 0, 0, 0, grip]], np.float32))
        assert obs["state"][0, 23] == pytest.approx(expect, abs=0.01)


def test_control_rate_and_substeps() -> None:
    env = make_env("mujoco_franka/reach", num_envs=1, control_hz=10, substeps=20)
    env.reset(seed=0)
    env.step(np.zeros((1, 7), np.float32))
    assert env.datas[0].time == pytest.approx(0.1)
    assert env.fms[0].model.opt.timestep == pytest.approx(0.005)


def test_unknown_task_and_option_errors_are_clear() -> None:
    with pytest.raises(UnknownEnvError, match="Known tasks: insert, language, lift, push, reach"):
        make_env("mujoco_franka/reech", num_envs=1)
    with pytest.raises(TypeError, match="unknown mujoco_franka option.*'obs_mod'"):
        make_env("mujoco_franka/reach", num_envs=1, obs_mod="state")
    with pytest.raises(ValueError, match="obs_mode='depth'"):
        make_env("mujoco_franka/reach", num_envs=1, obs_mode="depth")
    with pytest.raises(ValueError, match="unknown camera 'top'"):
        make_env("mujoco_franka/reach", num_envs=1, obs_mode="rgb", cameras=("top",))
    assert set(TASKS) >= {"reach", "push", "lift"}


def test_step_before_reset_is_an_error() -> None:
    env = make_env("mujoco_franka/reach", num_envs=1)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros((1, 7), np.float32))


def test_reach_defaults_for_the_ppo_runner() -> None:
    env = make_env("mujoco_franka/reach", num_envs=2)
    s = env.spec
    assert (s.state_dim, s.action_dim, s.max_episode_steps, s.control_hz) == (30, 7, 50, 20.0)
    assert s.cameras == {} and env.substeps == 10 and "target" in s.instruction
    obs = env.reset(seed=0)
    assert obs["images"] == {} and obs["instruction"] == [s.instruction] * 2
    frames = env.render_frames()  # video frames work in state mode too
    assert frames.shape == (2, 240, 320, 3) and frames.std() > 5  # sized for people, not policies
    env.close()
