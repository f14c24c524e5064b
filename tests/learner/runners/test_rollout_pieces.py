"""Rollout building blocks without Ray: toy env contract, trajectories, GRPO groups, PPO
learning."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learner.actor.ppo import PPOLearner, TensorBatch
from learner.actor.trainer import Trainer, policy_spec
from learner.rollout.collect import collect_inline
from learner.rollout.envs import GroupedVectorEnv, StageEnvs, build_env, stage_seed
from learner.rollout.revisit import FailedStates
from learner.rollout.trajectory import StepOutcome, TrajectoryBuilder, collate
from learner.runners.config import ActorConfig, AlgorithmConfig, EmbodiedConfig
from rlinf_contracts.config import ConfigError, from_dict


def test_toy_env_contract_chunks_autoreset_and_success() -> None:
    env = build_env("toy/point_reach", 4, max_episode_steps=5)
    obs = env.reset(seed=3)
    assert obs["state"].shape == (4, 6) and obs["state"].dtype == np.float32
    obs, rew, term, trunc, info = env.step(np.zeros((4, 3, 2), np.float32))  # a chunk of 3
    assert rew.shape == (4, 3) and info["valid_steps"].all()
    obs, rew, term, trunc, info = env.step(np.zeros((4, 3, 2), np.float32))  # time limit hits at 5
    assert trunc.all() and not term.any() and info["valid_steps"][:, 2].sum() == 0
    assert "final_observation" in info and (info["episode_length"] == 5).all()
    # aiming straight at the goal succeeds and terminates
    env = build_env("toy/point_reach", 2, max_episode_steps=100)
    obs = env.reset(seed=0)
    for _ in range(100):
        d = obs["state"][:, 4:6]
        obs, _, term, _, info = env.step(np.clip(d * 20 - obs["state"][:, 2:4] * 40, -1, 1))
        if term.any():
            assert info["success"][term].all()
            break
    else:
        pytest.fail("a goal-seeking controller never reached the goal")


def test_builder_bootstraps_truncation_and_masks_single_episodes() -> None:
    b = TrajectoryBuilder(2, gamma=0.5)
    for t in range(2):
        b.add_step(
            {"state": np.full((2, 1), t, np.float32)}, np.zeros((2, 1, 1)), np.zeros(2), np.ones(2)
        )
    b.add_outcome(
        StepOutcome.from_step(
            np.array([1.0, 1.0]),
            np.array([False, False]),
            np.array([False, True]),
            {
                "final_observation": {"state": np.zeros((2, 1), np.float32)},
                "success": np.array([False, False]),
                "episode_return": np.array([0, 5.0]),
                "episode_length": np.array([0, 9]),
            },
        ),
        final_values=np.array([4.0]),
    )
    b.add_outcome(
        StepOutcome.from_step(
            np.array([[1.0, 2.0], [0.0, 0.0]]),
            np.array([True, False]),
            np.array([False, False]),
            {
                "success": np.array([True, False]),
                "episode_return": np.array([7.0, 0.0]),
                "episode_length": np.array([2, 0]),
            },
        ),
        None,
    )
    traj = b.finish(np.array([0.0, 3.0]))
    # row 1 was truncated at t=0: reward 1 + gamma * V(final) = 1 + 0.5 * 4
    np.testing.assert_allclose(traj.rewards, [[1.0, 3.0], [3.0, 0.0]])  # chunk rewards summed
    np.testing.assert_allclose(traj.dones, [[0, 1], [1, 0]])
    assert traj.obs["state"].shape == (2, 2, 1) and traj.actions.shape == (2, 2, 1, 1)
    assert traj.stats.successes == [False, True] and traj.stats.returns == [5.0, 7.0]
    # single-episode mode: steps after the episode ended are masked and the score stops counting;
    # the score is the return discounted per policy step (gamma 1: the plain return)
    for gamma, score in ((1.0, 3.0), (0.5, 1.0 + 0.5 * 2.0)):
        s = TrajectoryBuilder(1, gamma=gamma, single_episode=True)
        for r, done in ((1.0, False), (2.0, True), (5.0, False)):
            s.add_step(
                {"state": np.zeros((1, 1), np.float32)},
                np.zeros((1, 1, 1)),
                np.zeros(1),
                np.zeros(1),
            )
            s.add_outcome(
                StepOutcome.from_step(
                    np.array([r]),
                    np.array([done]),
                    np.array([False]),
                    {
                        "success": np.array([done]),
                        "episode_return": np.array([3.0]),
                        "episode_length": np.array([2]),
                    },
                )
            )
        traj = s.finish(np.array([9.0]))
        np.testing.assert_allclose(traj.mask, [[1, 1, 0]])
        assert (
            traj.scores[0] == score and traj.bootstrap_value[0] == 0.0 and traj.stats.lengths == [2]
        )
    both = collate([traj, traj])
    assert both.mask.shape == (2, 3) and len(both.stats.successes) == 2


def test_grouped_env_resets_each_group_from_one_state() -> None:
    env = GroupedVectorEnv([build_env("toy/point_reach", 3) for _ in range(4)])
    obs = env.reset(seed=10)
    state = obs["state"].reshape(3, 4, 6)  # [group, member, D]
    assert np.allclose(state, state[:, :1])  # members of a group are identical
    assert not np.allclose(state[0], state[1])  # groups differ
    obs, rew, term, trunc, info = env.step(np.random.uniform(-1, 1, (12, 2)))
    assert rew.shape == (12,) and info["success"].shape == (12,)
    # training seeds never reach the eval range
    assert max(stage_seed(s, it, 99, 64) for s in (0, 7) for it in (0, 10**6)) < 1_000_000_000


def _toy_cfg(**over) -> EmbodiedConfig:
    base = {
        "env": {"num_envs": 16},
        "algorithm": {"gamma": 0.95},
        "actor": {"lr": 1e-3, "epochs": 4},
        "rollout": {"steps_per_iteration": 16},
    }
    for k, v in over.items():
        base.setdefault(k, {}).update(v)
    return from_dict(EmbodiedConfig, base)


@pytest.mark.parametrize("adv", ["gae", "grpo", "grpo-prefix", "grpo-revisit"])
def test_in_process_training_learns_toy_reach(adv: str) -> None:
    """``grpo-prefix``: groups replay their leader's first 0..3 steps, then branch (fewer steps
    train, 10 more iterations); ``grpo-revisit``: half the groups may re-run start states whose
    group all failed."""
    torch.set_num_threads(1)
    prefix = 3 if adv == "grpo-prefix" else 0
    revisit = FailedStates(0.5, 2, capacity=4) if adv == "grpo-revisit" else None
    adv = adv.partition("-")[0]
    cfg = _toy_cfg(
        algorithm={"adv": adv, "group_size": 4, "shared_prefix": prefix},
        env={"max_episode_steps": 20},
    )
    envs = StageEnvs(
        cfg.env.name, 16, 1, 4 if adv == "grpo" else 1, revisit, **cfg.env.factory_kwargs()
    )
    trainer = Trainer(cfg, policy_spec(cfg, envs.spec), 0, 1)
    rates = []
    for it in range(25 if adv == "gae" else 30 + 10 * bool(prefix)):
        if adv == "grpo" or it == 0:
            envs.reset(cfg.seed, it, 0)
        steps = 16 if adv == "gae" else 20
        traj = collect_inline(
            trainer.policy(),
            envs,
            steps,
            cfg.algorithm.gamma,
            seed=cfg.seed,
            iteration=it,
            first_stream=0,
            single_episode=adv == "grpo",
            shared_prefix=prefix,
        )
        if adv == "grpo":
            assert len(traj.stats.successes) == 16  # exactly one episode per row
        rates.append(traj.stats.summary().get("success_rate", 0.0))
        trainer.update(traj)
    assert np.mean(rates[-5:]) > max(0.8, np.mean(rates[:3]) + 0.2), rates


def _batch(
    scores: list[float], lengths: list[int], state_dim: int, horizon: int = 8
) -> TensorBatch:
    n = len(scores)
    mask = torch.zeros(n, horizon)
    for i, L in enumerate(lengths):
        mask[i, :L] = 1.0
    z = torch.zeros(n, horizon)
    rewards = z.clone()
    for i, (s, L) in enumerate(zip(scores, lengths)):
        rewards[i, L - 1] = s
    return TensorBatch(
        state=torch.zeros(n, horizon, state_dim),
        images={},
        actions=torch.zeros(n, horizon, 1),
        logp=z,
        values=torch.linspace(0, 1, n * horizon).reshape(n, horizon),
        rewards=rewards,
        dones=z,
        mask=mask,
        bootstrap=torch.zeros(n),
        scores=torch.tensor(scores),
    )


@pytest.mark.parametrize("adv", ["grpo", "gae"])
def test_update_advantages_are_not_shifted_by_episode_length(
    adv: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failures run to the time limit, successes end early: whitening broadcast GRPO advantages over
    steps would move an all-fail group (no signal) off zero and reinforce it. The update sees them
    as the group made them; GAE advantages are still whitened over the valid steps."""
    from learner.actor.ppo import TensorBatch

    cfg = _toy_cfg()
    envs = StageEnvs(cfg.env.name, 8, 1, **cfg.env.factory_kwargs())
    policy = Trainer(cfg, policy_spec(cfg, envs.spec), 0, 1).policy()
    # group 1: one short success, three long failures; group 2: four long failures
    b = _batch(
        [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [2, 8, 8, 8, 8, 8, 8, 8], envs.spec.state_dim
    )
    monkeypatch.setattr(TensorBatch, "from_trajectory", classmethod(lambda cls, t: b))
    learner = PPOLearner(
        policy,
        AlgorithmConfig(adv=adv, group_size=4, whiten_adv=True),
        ActorConfig(epochs=1, minibatches=1),
    )
    seen: list[torch.Tensor] = []

    def record(obs, actions, logp, v, a, *rest):
        seen.append(a)
        return {}

    learner._step = record  # type: ignore[method-assign]  # record the advantages the step gets
    learner.update(None)  # type: ignore[arg-type]  # from_trajectory is stubbed: b
    got = torch.sort(seen[0]).values
    if adv == "grpo":
        want = torch.sort(torch.tensor([1.5] * 2 + [-0.5] * 24 + [0.0] * 32)).values
        assert torch.allclose(got, want, atol=1e-4)
    else:
        assert abs(float(got.mean())) < 1e-5 and float(got.std()) == pytest.approx(1.0, abs=1e-4)


def test_seq_mean_aggregation_weighs_each_episode_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """``algorithm.agg_mode=seq-mean-token-mean``: a 2-step success and an 8-step failure of the
    same group carry the same total weight in the update (step-mean would give the failure 4x)."""
    from learner.actor.ppo import TensorBatch

    cfg = _toy_cfg()
    envs = StageEnvs(cfg.env.name, 8, 1, **cfg.env.factory_kwargs())
    policy = Trainer(cfg, policy_spec(cfg, envs.spec), 0, 1).policy()
    lengths = [2, 8, 8, 8, 8, 8, 8, 8]
    b = _batch([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], lengths, envs.spec.state_dim)
    monkeypatch.setattr(TensorBatch, "from_trajectory", classmethod(lambda cls, t: b))
    learner = PPOLearner(
        policy,
        AlgorithmConfig(adv="grpo", group_size=4, agg_mode="seq-mean-token-mean"),
        ActorConfig(epochs=1, minibatches=1),
    )
    seen: list[torch.Tensor] = []

    def record(obs, actions, logp, v, a, *rest):
        seen.append(a)
        return {}

    learner._step = record  # type: ignore[method-assign]  # record the advantages the step gets
    learner.update(None)  # type: ignore[arg-type]  # from_trajectory is stubbed: b
    got, n = seen[0], sum(lengths)
    scale = n / len(lengths)  # the step-mean of the weighted advantages is the mean over episodes
    count = lambda v: int(torch.isclose(got, torch.tensor(v), atol=1e-5).sum())  # noqa: E731
    assert count(1.5 * scale / 2) == 2  # the success, over its 2 steps
    assert count(-0.5 * scale / 8) == 24  # three failures, 8 steps each
    assert int((got == 0.0).sum()) == 32  # the all-fail group: no signal, whatever the weights
    with pytest.raises(ConfigError, match="algorithm.agg_mode"):
        from_dict(EmbodiedConfig, {"algorithm": {"agg_mode": "episode-mean"}})


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match="placement"):
        from_dict(EmbodiedConfig, {"placement": {"env,rollout": "all"}})
    with pytest.raises(ConfigError, match="env.num_envs"):
        from_dict(
            EmbodiedConfig, {"algorithm": {"adv": "grpo", "group_size": 3}, "env": {"num_envs": 16}}
        )
    with pytest.raises(ConfigError, match="rollout.pipeline_stages"):
        from_dict(EmbodiedConfig, {"rollout": {"pipeline_stages": 0}})


def test_ppo_learner_minibatches_cover_every_sample_once_per_epoch() -> None:
    cfg = _toy_cfg()
    envs = StageEnvs(cfg.env.name, 8, 1, **cfg.env.factory_kwargs())
    envs.reset(0, 0, 0)
    trainer = Trainer(cfg, policy_spec(cfg, envs.spec), 0, 1)
    traj = collect_inline(trainer.policy(), envs, 5, 0.9, seed=0, iteration=0, first_stream=0)
    learner = PPOLearner(trainer.policy(), AlgorithmConfig(), ActorConfig(epochs=2, minibatches=3))
    calls = []
    orig = learner._step

    def counted(obs, *a):
        calls.append(len(obs["state"]))
        return orig(obs, *a)

    learner._step = counted  # type: ignore[method-assign]  # count the rows per step
    learner.update(traj)
    assert calls == [14, 13, 13, 14, 13, 13]  # 40 samples, 3 minibatches, 2 epochs


def test_split_rows_keeps_groups_whole_and_stats_once() -> None:
    from learner.rollout.trajectory import split_rows

    b = TrajectoryBuilder(12, gamma=0.9)
    b.add_step(
        {"state": np.arange(12, dtype=np.float32)[:, None]},
        np.zeros((12, 1, 1)),
        np.zeros(12),
        np.zeros(12),
    )
    b.add_outcome(
        StepOutcome.from_step(
            np.ones(12), np.ones(12, bool), np.zeros(12, bool), {"success": np.ones(12, bool)}
        )
    )
    traj = b.finish(np.zeros(12))
    shards = split_rows(traj, 2, group_size=4)  # 3 groups of 4 over 2 actor ranks
    assert [s.mask.shape[0] for s in shards] == [8, 4]
    np.testing.assert_array_equal(
        np.concatenate([s.obs["state"][:, 0, 0] for s in shards]), np.arange(12)
    )
    assert len(shards[0].stats.successes) == 12 and not shards[1].stats.successes
    with pytest.raises(ValueError, match="3 group"):
        split_rows(traj, 4, group_size=4)
