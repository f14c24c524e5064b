"""The offline runner (BC, IQL, DAgger) on a small store of MuJoCo push demos."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from learner.checkpoint import load_policy
from learner.cluster import InProcess
from learner.offline.config import OfflineConfig
from learner.offline.data import bc_buffer, oracle_round, read_episodes, replay_of
from learner.offline.trainers import IQLTrainer, make_policy
from learner.offpolicy.batches import to_batch
from learner.offpolicy.nets import policy_spec
from learner.rollout.envs import build_env
from learner.runners import get_runner
from rlinf_contracts.config import ConfigError, from_dict

pytestmark = pytest.mark.sim
ENV = {"name": "mujoco_franka/push", "num_envs": 4, "control": "ee_delta_pos"}


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> str:
    """Four oracle push episodes in an episode store, as ``rlinf collect`` writes them."""
    import argparse

    from rlinf_cli.collect import run

    out = tmp_path_factory.mktemp("demos") / "push"
    args = argparse.Namespace(
        env="mujoco_franka/push",
        episodes=4,
        out=str(out),
        noise=0.1,
        only_success=False,
        max_attempts=None,
        seed=0,
        obs_mode="state",
        options=["control=ee_delta_pos"],
    )
    assert run(args) == 0
    return str(out)


def _cfg(tmp_path: Path, demos: str, **over) -> OfflineConfig:
    base = {
        "name": "o",
        "env": dict(ENV),
        "model": {"hidden": [64, 64]},
        "data": {"demos": demos},
        "algorithm": {"batch_size": 64},
        "train": {
            "updates": 300,
            "log_every": 100,
            "out_dir": str(tmp_path / "run"),
            "progress": False,
        },
        "eval": {"episodes": 4, "num_envs": 4},
    }
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) else v
    return from_dict(OfflineConfig, base)


def test_bc_fits_the_demos_and_writes_a_servable_checkpoint(tmp_path, demos):
    final = get_runner("offline").run(_cfg(tmp_path, demos), InProcess(2))
    hist = json.loads((tmp_path / "run" / "metrics.json").read_text())["history"]
    assert hist[-1]["train/bc_loss"] < 0.5 * hist[0]["train/bc_loss"]
    policy, meta = load_policy(final["checkpoint"])
    assert meta["model"]["name"] == "sac" and final["eval"]["id"]["episodes"] == 4
    eps = read_episodes(demos)
    obs = {"state": np.stack([ep.steps["state"][0] for ep in eps])}
    actions, _, value = policy.act(obs)
    assert actions.shape == (len(eps), 1, 4) and value is None


def test_iql_target_critic_follows_by_polyak_and_value_stays_off_q(tmp_path, demos):
    cfg = _cfg(tmp_path, demos, algorithm={"name": "iql", "tau": 0.1})
    episodes = read_episodes(demos)
    env = build_env(cfg.env.name, 1, **cfg.env.factory_kwargs())
    trainer = IQLTrainer(cfg, make_policy(cfg, policy_spec(env.spec, False)))
    replay = replay_of(episodes, cfg.algorithm.gamma)
    rng = np.random.default_rng(0)
    target0 = [p.clone() for p in trainer.target_critic.parameters()]
    critic0 = [p.clone() for p in trainer.critic.parameters()]
    batch = to_batch(replay.sample(64, rng), [])
    trainer.update(batch)
    for t0, c0, t, c in zip(
        target0, critic0, trainer.target_critic.parameters(), trainer.critic.parameters()
    ):
        # Polyak: theta' <- tau theta_new + (1 - tau) theta'_old
        torch.testing.assert_close(t, 0.1 * c.detach() + 0.9 * t0)
        assert not torch.equal(c, c0)
    assert all(not p.requires_grad for p in trainer.target_critic.parameters())
    for p in trainer.critic.parameters():
        p.grad = None
    from learner.algorithms.iql import iql_value_loss

    loss = iql_value_loss(
        trainer.target_critic(batch["obs"], batch["action"]), trainer.value(batch["obs"]).squeeze(0)
    )
    loss.backward()
    assert all(p.grad is None for p in trainer.critic.parameters())


def test_dagger_labels_learner_states_with_the_oracle(tmp_path, demos):
    from sim_bridges.mujoco_franka import oracle_action

    cfg = _cfg(tmp_path, demos)
    env = build_env(cfg.env.name, 4, **cfg.env.factory_kwargs())
    policy = make_policy(cfg, policy_spec(env.spec, False))
    buf = bc_buffer(read_episodes(demos))
    n0 = len(buf)
    stats = oracle_round(env, policy, buf, 40, beta=0.0, generator=torch.Generator().manual_seed(0))
    assert len(buf) == n0 + 40 and stats["dagger/dataset"] == n0 + 40
    data = buf.tensors()
    assert (data["source"][n0:] == buf.RELABEL).all()
    env.reset(5)  # the labels are the oracle's actions at the visited states
    first = torch.as_tensor(oracle_action(env))
    visited_again = torch.as_tensor(env.reset(5)["state"])
    assert first.shape == (4, 4) and visited_again.shape[1] == data["obs"].shape[1]


def test_dagger_runner_aggregates_rounds(tmp_path, demos):
    cfg = _cfg(
        tmp_path,
        demos,
        algorithm={"name": "dagger", "rounds": 2, "round_env_steps": 80},
        train={"updates": 100, "log_every": 50},
    )
    final = get_runner("offline").run(cfg, InProcess(2))
    assert final["dagger/dataset"] > sum(len(ep) for ep in read_episodes(demos)) + 150
    assert final["updates"] == 300  # BC round + 2 DAgger rounds of 100 updates


def test_offline_config_errors(tmp_path, demos):
    with pytest.raises(ConfigError, match="data.demos"):
        from_dict(OfflineConfig, {})
    cfg = _cfg(tmp_path, demos, env={"control": "ee_delta"})  # 7-D actions, the demos have 4
    with pytest.raises(ConfigError, match="action 4"):
        get_runner("offline").run(cfg, InProcess(2))
