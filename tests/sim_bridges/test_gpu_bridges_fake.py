"""The GPU-batched bridges (ManiSkill ``physx_cuda``, IsaacLab) over CPU look-alikes of their
simulators: the conformance suite, idle rows inside a chunk, the simulators' own flags."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts.env import VectorEnv
from sim_bridges import isaaclab_bridge as il
from sim_bridges import maniskill_bridge as ms
from tests.sim_bridges.conformance import CHECKS

pytest.importorskip("torch")
from tests.sim_bridges.fake_gpu_sims import FakeIsaacLab, FakeManiSkill


def _maniskill(n: int, t: int) -> ms.ManiSkillBatched:
    return ms.ManiSkillBatched(ms.ManiSkillConfig(max_episode_steps=t), FakeManiSkill(n), n)


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_maniskill_batched_conformance(check: str) -> None:
    CHECKS[check](_maniskill)


def test_maniskill_batched_idles_finished_rows_and_keeps_their_final_obs() -> None:
    env = _maniskill(2, 50)
    sim: FakeManiSkill = env.env
    env.reset(seed=0)
    acts = np.full((2, 4, 2), 0.5, np.float32)
    sim.goal[0] = sim.pos[0] + 0.05  # row 0 succeeds on its first sub-step
    ended_state = np.concatenate([sim.pos[0] + 0.05, sim.goal[0]]).astype(np.float32)
    obs, rew, term, trunc, info = env.step(acts)
    assert term.tolist() == [True, False] and info["success"].tolist() == [True, False]
    assert (
        info["valid_steps"][0].tolist() == [True, False, False, False]
        and info["valid_steps"][1].all()
    )
    assert all(np.all(a[0] == 0.0) for a in sim.actions[1:])  # idle on zero actions, then reset
    np.testing.assert_allclose(info["final_observation"]["state"][0], ended_state, atol=1e-6)
    assert not np.allclose(obs["state"][0], ended_state)  # row 0 started a new episode
    assert info["episode_length"].tolist() == [1, 0] and rew[0, 1:].tolist() == [0, 0, 0]


def test_maniskill_batched_fail_terminates() -> None:
    env = _maniskill(1, 50)
    env.reset(seed=0)
    env.env.pos[0] = [0.99, 0.0]
    _, _, term, trunc, info = env.step(np.array([[1.0, 0.0]], np.float32))
    assert term.tolist() == [True] and not trunc.any() and info["success"].tolist() == [False]


def _isaac(n: int, t: int, time_limit: int = 1000) -> il.IsaacLabEnv:
    return il.IsaacLabEnv(
        il.IsaacLabConfig(max_episode_steps=t, device="cpu"), FakeIsaacLab(n, time_limit)
    )


def test_isaaclab_flags_budget_and_reset_final_observation() -> None:
    env: VectorEnv = _isaac(2, 3)
    assert (
        env.spec.num_envs == 2
        and env.spec.state_dim == 4
        and env.spec.control_hz == pytest.approx(20)
    )
    env.reset(seed=1)
    sim: FakeIsaacLab = env.env
    sim.goal[1] = sim.pos[1] + 0.1  # row 1 reaches its goal (IsaacLab's success term) at once
    obs, rew, term, trunc, info = env.step(np.ones((2, 5, 2), np.float32))
    assert term.tolist() == [False, True] and trunc.tolist() == [
        True,
        False,
    ]  # row 0: our budget (3)
    assert info["episode_length"].tolist() == [3, 1] and info["success"].tolist() == [False, True]
    assert info["final_observation_is_reset"] is True
    assert all(np.all(a[1] == 0.0) for a in sim.actions[1:])
    # IsaacLab's own time-out truncates
    env = _isaac(1, 100, time_limit=2)
    env.reset(seed=0)
    _, _, term, trunc, _ = env.step(np.zeros((1, 3, 2), np.float32))
    assert trunc.tolist() == [True] and not term.any()
