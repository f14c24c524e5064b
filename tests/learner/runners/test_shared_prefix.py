"""Groups that replay their leader's first actions, then branch (learner.rollout.branching)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learner.actor.trainer import Trainer, policy_spec
from learner.rollout.branching import SharedPrefix
from learner.rollout.collect import collect_inline, draw_prefix
from learner.rollout.envs import StageEnvs
from learner.runners.config import EmbodiedConfig
from rlinf_contracts.config import ConfigError, from_dict


def test_apply_copies_the_leader_row_and_masks_the_shared_steps() -> None:
    prefix = SharedPrefix(group_size=3, branch_at=np.array([0, 2]))
    actions = np.arange(6 * 2, dtype=np.float32).reshape(6, 1, 2)
    logp = np.arange(6, dtype=np.float32)
    credit = prefix.apply(1, actions, logp)
    # group 0 branched at step 0: untouched, credited; group 1 still shares: rows 4, 5 take row 3
    np.testing.assert_array_equal(credit, [1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(logp, [0, 1, 2, 3, 3, 3])
    np.testing.assert_array_equal(actions[4], actions[3])
    np.testing.assert_array_equal(actions[1], [[2, 3]])
    assert prefix.apply(2, actions, logp).all()  # from its branch step on every member is its own
    assert SharedPrefix.draw(8, 4, 0, seed=1) is None and SharedPrefix.draw(8, 1, 5, seed=1) is None
    draws = np.concatenate([SharedPrefix.draw(64, 4, 3, seed=s).branch_at for s in range(20)])
    assert set(draws.tolist()) == {0, 1, 2, 3}  # uniform in 0..max_steps
    with pytest.raises(ValueError, match="groups of 4"):
        SharedPrefix.draw(6, 4, 2, seed=0)


def _cfg(**algorithm) -> EmbodiedConfig:
    return from_dict(
        EmbodiedConfig,
        {
            "env": {"name": "mujoco_franka/push", "num_envs": 6},
            "algorithm": {"adv": "grpo", "group_size": 2, **algorithm},
        },
    )


def test_mujoco_groups_stay_identical_through_the_shared_prefix_then_branch() -> None:
    """The simulator is deterministic given seed and actions: members that replay their leader's
    actions are in the leader's state when they branch, which is what makes the group mean a
    value of the branch state. Shared steps carry no loss; the episode's outcome is unchanged."""
    torch.manual_seed(0)
    cfg = _cfg(shared_prefix=4)
    envs = StageEnvs(cfg.env.name, 6, 1, 2, **cfg.env.factory_kwargs())
    policy = Trainer(cfg, policy_spec(cfg, envs.spec), 0, 1).policy()
    envs.reset(cfg.seed, 3, 0)
    steps = 6
    traj = collect_inline(
        policy,
        envs,
        steps,
        1.0,
        seed=cfg.seed,
        iteration=3,
        first_stream=0,
        single_episode=True,
        shared_prefix=4,
    )
    branch_at = draw_prefix(6, 2, 4, seed=cfg.seed, stream=0, iteration=3).branch_at
    state, acts = traj.obs["state"], traj.actions
    for g, k in enumerate(branch_at):
        lead, member = 2 * g, 2 * g + 1
        assert np.array_equal(acts[lead, :k], acts[member, :k])
        assert np.array_equal(
            state[lead, : k + 1], state[member, : k + 1]
        )  # same state at the branch step
        if k < steps:
            assert not np.allclose(acts[lead, k], acts[member, k])  # then each samples its own
        assert not traj.mask[lead : member + 1, :k].any()
        assert traj.mask[lead : member + 1, k:].sum() > 0 or k == steps
    assert len(branch_at) == 3 and len(set(branch_at.tolist())) > 1
    envs.close()


def test_shared_prefix_needs_a_grouped_estimator() -> None:
    with pytest.raises(ConfigError, match="algorithm.shared_prefix"):
        from_dict(EmbodiedConfig, {"algorithm": {"adv": "gae", "shared_prefix": 2}})
    with pytest.raises(ConfigError, match="algorithm.shared_prefix"):
        _cfg(shared_prefix=-1)
