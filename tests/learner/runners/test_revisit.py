"""Start states whose whole GRPO group failed are re-run later (learner.rollout.revisit)."""

from __future__ import annotations

import numpy as np
import pytest

from learner.rollout.envs import StageEnvs
from learner.rollout.revisit import FailedStates
from learner.runners.config import EmbodiedConfig
from rlinf_contracts.config import ConfigError, from_dict
from rlinf_contracts.env_registry import make_env


def test_draw_replaces_up_to_the_share_and_record_queues_only_failures_with_runs_left() -> None:
    fs = FailedStates(share=0.5, times=2, capacity=3)
    assert fs.draw([10, 11, 12, 13]) == ([10, 11, 12, 13], [0, 0, 0, 0])  # nothing queued yet
    assert fs.record([10, 11, 12, 13], [0, 0, 2, 1], np.array([True, False, False, False])) == 2
    assert list(fs.queue) == [(11, 1), (13, 2)]  # 10 succeeded, 12 has had its re-runs
    assert fs.draw([20, 21, 22]) == ([11, 21, 22], [1, 0, 0])  # int(0.5 * 3) = 1 slot
    fs.record([1, 2, 3, 4], [0] * 4, np.zeros(4, bool))
    assert [s for s, _ in fs.queue] == [2, 3, 4]  # bounded: the oldest dropped out


def _toy(share: float = 0.5, times: int = 1) -> StageEnvs:
    return StageEnvs(
        "toy/point_reach", 8, 1, 2, FailedStates(share, times, capacity=4), max_episode_steps=30
    )


def _oracle(state: np.ndarray) -> np.ndarray:
    """Accelerate toward the goal, braking near it: reaches it well within 30 steps."""
    return np.clip(4.0 * state[:, 4:6] - 2.0 * state[:, 2:4], -1.0, 1.0)


def _run(envs: StageEnvs, solve_rows: slice) -> None:
    for _ in range(30):
        act = np.zeros((8, 2))
        act[solve_rows] = _oracle(envs.obs[0]["state"])[solve_rows]
        envs.step(0, act)


def test_all_fail_groups_start_again_from_the_same_state_in_the_next_iteration() -> None:
    envs = _toy()
    envs.reset(seed=0, iteration=0, first_stream=0)
    start0 = envs.obs[0]["state"].copy()
    assert envs.revisited == 0
    _run(envs, slice(0, 4))  # groups 0 and 1 solve their episodes, groups 2 and 3 stand still
    assert envs._won[0].tolist() == [True] * 4 + [False] * 4
    envs.reset(seed=0, iteration=1, first_stream=0)
    start1 = envs.obs[0]["state"]
    assert envs.revisited == 2  # 4 groups x share 0.5
    np.testing.assert_array_equal(start1[:4], start0[4:])  # the failed groups' start states, again
    assert not np.allclose(start1[4:], start0[4:]) and not np.allclose(
        start1[4:], start0[:4]
    )  # fresh
    _run(envs, slice(0, 0))  # everything fails now
    envs.reset(seed=0, iteration=2, first_stream=0)
    np.testing.assert_array_equal(
        envs.obs[0]["state"][:4], start1[4:]
    )  # times=1: re-runs are not re-queued
    envs.close()


def test_without_revisit_the_seeds_are_unchanged() -> None:
    """Off by default, and on with an empty queue, a stage resets exactly as before."""
    plain = StageEnvs("toy/point_reach", 8, 1, 2, max_episode_steps=30)
    plain.reset(seed=3, iteration=5, first_stream=1)
    on = _toy()
    on.reset(seed=3, iteration=5, first_stream=1)
    np.testing.assert_array_equal(plain.obs[0]["state"], on.obs[0]["state"])
    plain.close(), on.close()


def test_mujoco_group_re_run_starts_where_the_failed_group_started() -> None:
    """On a real simulator (every family's per-row seeds: tests/sim_bridges/conformance.py)."""
    envs = StageEnvs("mujoco_franka/push", 4, 1, 2, FailedStates(0.5, 1, capacity=2))
    envs.reset(seed=0, iteration=0, first_stream=0)
    start0 = envs.obs[0]["state"].copy()
    envs.reset(seed=0, iteration=1, first_stream=0)  # nothing ran: no success, both groups queued
    np.testing.assert_array_equal(envs.obs[0]["state"][:2], start0[:2])
    assert not np.allclose(envs.obs[0]["state"][2:], start0[2:])
    with pytest.raises(ValueError, match="2 seeds for 3 rows"):
        make_env("mujoco_franka/push", num_envs=3).reset([1, 2])
    envs.close()


@pytest.mark.parametrize(
    ("over", "key"),
    [
        ({"adv": "gae", "revisit_share": 0.25}, "algorithm.revisit_share"),
        ({"adv": "grpo", "revisit_share": 1.0}, "algorithm.revisit_share"),
        ({"adv": "grpo", "revisit_share": 0.25, "revisit_times": 0}, "algorithm.revisit_times"),
    ],
)
def test_revisit_config_errors_name_the_key(over: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        from_dict(EmbodiedConfig, {"algorithm": over})
