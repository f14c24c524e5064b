"""The off-policy runner: DrQ pieces, learning on the toy env, restart from checkpoint + episode
store, RLPD with demos, placement rules and the async (env workers + learner) topology."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from learner.checkpoint import load_policy
from learner.cluster import InProcess
from learner.offpolicy.batches import random_shift, to_batch
from learner.offpolicy.config import OffPolicyConfig
from learner.offpolicy.learner import OffPolicyLearner
from learner.offpolicy.topology import runs_in_process
from learner.rollout.envs import build_env
from learner.runners import get_runner
from rlinf_contracts.config import ConfigError, from_dict
from rlinf_data.store import EpisodeStore

TOY = {"name": "toy/point_reach", "num_envs": 4, "max_episode_steps": 20}


def _cfg(tmp_path: Path, **over) -> OffPolicyConfig:
    base = {
        "name": "t",
        "env": dict(TOY),
        "model": {"hidden": [64, 64], "critic_hidden": [64, 64]},
        "algorithm": {"utd_ratio": 0.25, "batch_size": 64, "gamma": 0.95},
        "train": {
            "env_steps": 800,
            "warmup_steps": 200,
            "learning_starts": 200,
            "log_every": 200,
            "out_dir": str(tmp_path / "run"),
            "progress": False,
            "tensorboard": False,
            "final_eval": False,
        },
        "eval": {"episodes": 8, "num_envs": 4},
    }
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) else v
    return from_dict(OffPolicyConfig, base)


def _run(cfg: OffPolicyConfig, cluster=None) -> dict:
    return get_runner("offpolicy").run(cfg, cluster or InProcess(2))


# ------------------------------------------------------------------------------ DrQ pieces
def test_random_shift_is_a_crop_of_the_padded_image():
    img = np.random.default_rng(0).integers(0, 255, (16, 12, 10, 3), dtype=np.uint8)
    out = random_shift(img, 4, np.random.default_rng(1))
    assert out.shape == img.shape and out.dtype == np.uint8
    padded = np.pad(img, ((0, 0), (4, 4), (4, 4), (0, 0)), mode="edge")
    for b in range(16):  # every sample is some window of its own padded image
        hits = [
            (dy, dx)
            for dy in range(9)
            for dx in range(9)
            if np.array_equal(padded[b, dy : dy + 12, dx : dx + 10], out[b])
        ]
        assert hits
    assert not all(np.array_equal(out[b], img[b]) for b in range(16))  # some really moved


def test_image_encoder_is_trained_by_the_critic_only(tmp_path):
    cfg = _cfg(
        tmp_path,
        env={"obs_mode": "image"},
        model={"use_images": True, "image_feat_dim": 8, "cnn_channels": [4, 4]},
    )
    env = build_env(cfg.env.name, 4, **cfg.env.factory_kwargs())
    core = OffPolicyLearner(cfg, env.spec)
    lr = core.learner
    enc = core.policy.encoder.pixels
    enc_ids = {id(p) for p in enc.parameters()}
    assert not enc_ids & {id(p) for g in lr.actor_opt.param_groups for p in g["params"]}
    assert enc_ids <= {id(p) for g in lr.critic_opt.param_groups for p in g["params"]}
    assert lr.target_critic.encoder is not enc  # the target holds its own (Polyak) copy
    obs = env.reset(0)
    action = np.zeros((4, 2), np.float32)
    nxt, reward, term, trunc, _ = env.step(action)
    sample = {
        "obs": obs,
        "next_obs": nxt,
        "action": action,
        "reward": reward.astype(np.float32),
        "discount": np.full(4, 0.9, np.float32),
    }
    batch = to_batch(sample, core.cameras, pad=4, rng=np.random.default_rng(0))
    assert batch["obs"]["images"]["top"].shape == (4, 32, 32, 3)
    dist = lr.actor(batch["obs"])
    a, logp = dist.rsample()
    (logp.sum() + a.sum()).backward()
    assert all(p.grad is None for p in enc.parameters())  # no actor gradient reaches the encoder
    assert any(p.grad is not None for p in core.policy.net.parameters())
    before = [p.detach().clone() for p in enc.parameters()]
    lr.update_critic(batch)
    assert any(
        not torch.equal(b, p) for b, p in zip(before, enc.parameters())
    )  # the critic loss moves it


# ------------------------------------------------------------------------------ the runner
@pytest.mark.slow
def test_sac_learns_the_toy_env(tmp_path):
    """~2,000 updates take the toy reach from ~8% to ~90% training success (~30 s of CPU)."""
    cfg = _cfg(
        tmp_path,
        train={"env_steps": 2250, "log_every": 250, "final_eval": True},
        algorithm={"utd_ratio": 1.0, "init_alpha": 0.1},
        eval={"episodes": 20, "num_envs": 10},
    )
    final = _run(cfg)
    hist = json.loads((Path(cfg.train.out_dir) / "metrics.json").read_text())["history"]
    first, last = hist[0]["episode_return"], hist[-1]["episode_return"]
    assert last > first + 5.0, (first, last)
    assert hist[-1]["success_rate"] > hist[0]["success_rate"] + 0.4
    assert final["eval"]["id"]["success_rate"] >= 0.5 and final["eval"]["id"]["episodes"] == 20
    assert Path(final["curves"]).is_file()


def test_restart_from_checkpoint_and_store_continues(tmp_path):
    cfg = _cfg(tmp_path)
    first = _run(cfg)
    store = EpisodeStore(Path(cfg.train.out_dir) / "episodes", "r")
    stored = [ep for ep in store]
    assert stored and all(ep.info.source == "online" for ep in stored)
    assert first["env_steps"] == 800 and first["updates"] == 150  # (800 - 200) * 0.25
    policy, meta = load_policy(first["checkpoint"])  # the actor alone serves / evaluates
    assert meta["model"]["name"] == "sac" and meta["counters"]["env_steps"] == 800

    cfg2 = _cfg(tmp_path, train={"env_steps": 1200, "resume": first["checkpoint"]})
    core_rows = sum(len(ep) + 1 for ep in stored)  # each episode: its steps + its final observation
    second = _run(cfg2)
    assert second["env_steps"] == 1200 and second["updates"] == 250  # continued, not restarted
    assert second["replay/online"] >= core_rows  # refilled from the store, then grown
    hist = json.loads((Path(cfg2.train.out_dir) / "metrics.json").read_text())["history"]
    assert [h["env_steps"] for h in hist][:4] == [200.0, 400.0, 600.0, 800.0]  # history appended to
    assert len(EpisodeStore(Path(cfg.train.out_dir) / "episodes", "r")) > len(stored)


def test_resumed_learner_equals_the_saved_one(tmp_path):
    from learner.offpolicy.state import load, save

    cfg = _cfg(tmp_path)
    env = build_env(cfg.env.name, 4, **cfg.env.factory_kwargs())
    a, b = OffPolicyLearner(cfg, env.spec), OffPolicyLearner(_cfg(tmp_path, seed=1), env.spec)
    a.learner.update_critic(
        {
            "obs": torch.randn(8, 6),
            "next_obs": torch.randn(8, 6),
            "action": torch.rand(8, 2),
            "reward": torch.randn(8),
            "done": torch.zeros(8),
        }
    )
    a.env_steps, a.updates = 123, 45
    path = save(a, tmp_path / "ck", 3, 7, {}, {}, None)
    load(b, path)
    for x, y in zip(a.learner.critic.state_dict().values(), b.learner.critic.state_dict().values()):
        assert torch.equal(x, y)
    assert b.counters() == a.counters()
    assert (
        b.learner.critic_opt.state_dict()["state"].keys()
        == a.learner.critic_opt.state_dict()["state"].keys()
    )


def test_rlpd_reads_demos_into_the_demo_source(tmp_path):
    from learner.offpolicy.collect import Collector

    cfg = _cfg(
        tmp_path,
        algorithm={"name": "rlpd", "n_critics": 4},
        train={"demos": str(tmp_path / "demos")},
    )
    env = build_env(cfg.env.name, 4, **cfg.env.factory_kwargs())
    core0 = OffPolicyLearner(_cfg(tmp_path), env.spec)
    col, store = Collector(env, core0.policy, "toy", 0), EpisodeStore(tmp_path / "demos")
    while len(store) < 3:
        for ep in col.step(random=True).finished:
            store.write(ep)
    core = OffPolicyLearner(cfg, env.spec)
    assert (
        core.replay.size("demo") == sum(len(ep) + 1 for ep in store)
        and core.replay.size("online") == 0
    )
    assert core.learner.critic.n_critics == 4 and core.learner.cfg.critic_subset == 2
    sample = core.replay.sample(64, np.random.default_rng(0))
    assert set(sample["source"].tolist()) == {0}  # only demos so far: they fill the whole batch
    final = _run(from_dict(OffPolicyConfig, {**json.loads(json.dumps(_cfg_dict(cfg)))}))
    assert final["replay/demo"] > 0 and final["updates"] > 0


def _cfg_dict(cfg: OffPolicyConfig) -> dict:
    from rlinf_contracts.config import to_dict

    return to_dict(cfg)


def test_config_and_placement_errors(tmp_path):
    with pytest.raises(ConfigError, match="train.demos"):
        _cfg(tmp_path, algorithm={"name": "rlpd"})
    with pytest.raises(ConfigError, match="crossq runs on state"):
        _cfg(
            tmp_path,
            algorithm={"name": "crossq"},
            env={"obs_mode": "image"},
            model={"use_images": True},
        )
    with pytest.raises(ConfigError, match="placement"):
        _cfg(tmp_path, placement={"env,learner": "0"})
    bad = _cfg(tmp_path, placement={"env,learner": "0", "replay": "1"})
    with pytest.raises(ConfigError, match="replay .* must be placed with the learner"):
        _run(bad)
    assert runs_in_process(_cfg(tmp_path), 2)
    assert not runs_in_process(_cfg(tmp_path, placement={"env": "0", "learner,replay": "1"}), 2)


def test_crossq_runs_fused(tmp_path):
    final = _run(_cfg(tmp_path, algorithm={"name": "crossq"}, train={"env_steps": 400}))
    assert final["updates"] == 50 and "train/critic_loss" in final


@pytest.mark.ray
@pytest.mark.parametrize(
    "placement",
    [{"env": "0", "learner,replay": "1"}, {"env,learner,replay": "0"}],
    ids=["async", "fused-ray"],
)
def test_placements_on_ray(ray_cluster, tmp_path, placement):
    cfg = _cfg(
        tmp_path,
        placement=placement,
        env={"num_envs": 4},
        train={"env_steps": 800, "publish_every": 20, "queue_episodes": 4},
    )
    final = _run(cfg, ray_cluster)
    assert final["topology"] == ("async" if "env" in placement else "fused")
    assert final["env_steps"] >= 800 and final["updates"] > 0
    if final["topology"] == "async":
        assert final["weight_version"] > 1  # env workers were sent newer weights
    assert len(EpisodeStore(Path(cfg.train.out_dir) / "episodes", "r")) > 0


def _robot_episodes(tmp_path: Path, n: int) -> tuple:
    """The toy env and ``n`` random episodes of it; the first is also written to
    ``tmp_path/demos`` (the demos of the tests' rlpd configs)."""
    from learner.offpolicy.collect import Collector

    env = build_env(TOY["name"], 4, max_episode_steps=20)
    core0 = OffPolicyLearner(_cfg(tmp_path), env.spec)
    col, store = Collector(env, core0.policy, "toy", 0), EpisodeStore(tmp_path / "demos")
    episodes = []
    while len(episodes) < n:
        episodes += col.step(random=True).finished
    store.write(episodes[0])
    return env, episodes[:n]


@pytest.mark.parametrize("route", ["demo", "online"])
def test_a_humans_taken_over_steps_join_the_demos(tmp_path, route):
    """HIL-SERL's learner: a correction is a demonstration, so the taken-over runs of a robot
    episode go to the demo source as well as the online one (``replay.interventions: demo``)."""
    env, episodes = _robot_episodes(tmp_path, 2)
    cfg = _cfg(
        tmp_path,
        algorithm={"name": "rlpd", "n_critics": 2},
        train={"demos": str(tmp_path / "demos")},
        replay={"interventions": route},
    )
    core = OffPolicyLearner(cfg, env.spec)
    demo0 = core.replay.size("demo")
    ep = episodes[1]
    ep.steps["intervention"][:] = False
    ep.steps["intervention"][3:8] = True  # the human drove steps 3-7
    core.ingest_episode(ep)
    core.add_interventions(ep)
    assert core.replay.size("online") == len(ep) + 1
    assert core.replay.size("demo") - demo0 == (5 + 1 if route == "demo" else 0)
    with pytest.raises(ConfigError, match="did you mean 'demo'"):
        _cfg(tmp_path, replay={"interventions": "demos"})


def test_bc_weight_imitates_the_prior_rows(tmp_path):
    """``algorithm.bc_weight``: each batch marks its prior rows (the demo source's, and any
    taken-over step of the online source) and the actor's loss reads them (``train/bc_loss``)."""
    env, episodes = _robot_episodes(tmp_path, 3)
    cfg = _cfg(
        tmp_path,
        algorithm={"name": "rlpd", "n_critics": 2, "bc_weight": 1.0},
        train={"demos": str(tmp_path / "demos")},
        replay={"interventions": "online"},
    )
    core = OffPolicyLearner(cfg, env.spec)
    taken_over, alone = episodes[1], episodes[2]
    taken_over.steps["intervention"][:] = True
    alone.steps["intervention"][:] = False
    for ep in (taken_over, alone):
        core.ingest_episode(ep)
    sample = core.replay.sample(256, np.random.default_rng(0))
    prior = core.prior_rows(sample)
    demo = sample["source"] == list(core.replay.cfg.mix).index("demo")
    assert prior[demo].all() and demo.any()
    online = ~demo
    assert (prior[online] == sample["intervention"][online].astype(bool)).all()
    assert prior[online].any() and not prior[online].all()
    final = _run(cfg)
    assert final["train/bc_loss"] >= 0 and final["updates"] > 0
    with pytest.raises(ConfigError, match="bc_weight.*must be >= 0"):
        _cfg(tmp_path, algorithm={"bc_weight": -1.0})
    with pytest.raises(ConfigError, match="bc_weight.*has none"):
        _cfg(tmp_path, algorithm={"bc_weight": 0.5})
