"""The push learner's reward on robot data is the simulator's push reward, for demos too."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="needs the sim extra")
pytest.importorskip("torch", reason="needs the learner extra")

from rlinf_contracts.config import ConfigError
from rlinf_contracts.episode import Episode, EpisodeInfo, StepLayout

pytestmark = [pytest.mark.sim]


def _sim_episode(steps: int = 40):
    """A push episode of the simulator (oracle + noise) as the robot would stream it: state, action,
    the success flag as reward; with the simulator's own (dense + success) rewards beside it."""
    from rlinf_contracts.env_registry import make_env

    env = make_env("mujoco_franka/push", num_envs=1, obs_mode="state", control="ee_delta_pos")
    obs = env.reset(seed=3)
    rng = np.random.default_rng(0)
    fm, d = env.fms[0], env.datas[0]
    states, actions, flags, sim_rewards = [], [], [], []
    for _ in range(steps):
        a = env.task.oracle(fm, d, d.site_xpos[fm.ee_site].copy())
        a = np.clip(
            np.r_[a[:3] / env.spec.robot.action.pos_scale + rng.normal(0, 0.3, 3), a[3]], -1, 1
        )
        states.append(obs["state"][0].copy())
        actions.append(a.astype(np.float32))
        obs, reward, terminated, _, info = env.step(a[None].astype(np.float32))
        flags.append(float(info["success"][0]))
        sim_rewards.append(float(reward[0]))
        if terminated[0]:
            break
    final = (info["final_observation"] if terminated[0] else obs)["state"][
        0
    ]  # the state after the last step
    n = len(states)
    steps_d = {
        "state": np.stack(states).astype(np.float32),
        "action": np.stack(actions),
        "reward": np.asarray(flags, np.float32),
        "terminated": np.eye(n, dtype=bool)[-1] & bool(flags[-1]),
        "truncated": np.zeros(n, bool),
        "intervention": np.zeros(n, bool),
        "policy_version": np.zeros(n, np.int64),
        "timestamp": np.zeros(n),
    }
    ep = Episode(
        EpisodeInfo(
            task="mujoco_franka/push", layout=StepLayout(36, 4), source="demo", status="complete"
        ),
        steps_d,
        {"state": np.asarray(final, np.float32)},
    )
    spec = env.spec.robot
    env.close()
    return ep, np.asarray(sim_rewards), spec


def test_push_distance_reward_is_the_simulators_push_reward() -> None:
    from learner.offpolicy.remote import REWARDS
    from rlinf_contracts.spec import RobotSpec

    ep, sim_rewards, spec = _sim_episode()
    r = REWARDS.get("push_distance")(spec)(ep)
    np.testing.assert_allclose(r, sim_rewards, atol=1e-4)
    assert r.min() < -0.1  # dense: not the success flag
    with pytest.raises(ConfigError, match="object_minus_ee"):
        REWARDS.get("push_distance")(
            RobotSpec.from_dict(
                {"state": [["ee_pos", 3]], "action": {"control": "ee_delta", "dim": 7}}
            )
        )


def test_load_demos_relabels_with_the_ingest_reward(tmp_path) -> None:
    from learner.offpolicy.learner import load_demos
    from learner.offpolicy.remote import REWARDS
    from rlinf_data.store import EpisodeStore

    ep, sim_rewards, spec = _sim_episode(20)
    EpisodeStore(tmp_path / "demos").write(ep)
    seen = []

    class Replay:  # records what the demo source receives
        def add_episode(self, e, source):
            seen.append((source, e.steps["reward"].copy()))

    assert load_demos(
        Replay(), str(tmp_path / "demos"), StepLayout(36, 4), REWARDS.get("push_distance")(spec)
    ) == len(ep)
    np.testing.assert_allclose(seen[0][1], sim_rewards, atol=1e-4)
    seen.clear()
    load_demos(Replay(), str(tmp_path / "demos"), StepLayout(36, 4))
    np.testing.assert_array_equal(seen[0][1], ep.steps["reward"])  # no reward given: as recorded


def test_refill_after_a_restart_takes_intervention_episodes_and_relabels(tmp_path) -> None:
    """A restart's replay refill takes the robot's ``intervention``-source episodes too (the live
    ingest did), and gives the stored (streamed) rewards the learner's online reward."""
    import dataclasses

    from learner.offpolicy.collect import Collector
    from learner.offpolicy.config import OffPolicyConfig
    from learner.offpolicy.learner import OffPolicyLearner
    from learner.rollout.envs import build_env
    from rlinf_contracts.config import from_dict
    from rlinf_data.store import EpisodeStore

    cfg = from_dict(
        OffPolicyConfig,
        {
            "name": "t",
            "env": {"name": "toy/point_reach", "num_envs": 2, "max_episode_steps": 10},
            "model": {"hidden": [16], "critic_hidden": [16]},
            "train": {"out_dir": str(tmp_path / "run"), "progress": False},
        },
    )
    env = build_env(cfg.env.name, 2, **cfg.env.factory_kwargs())
    core = OffPolicyLearner(cfg, env.spec)
    col, store = Collector(env, core.policy, "toy", 0), EpisodeStore(tmp_path / "eps")
    sources = ["online", "intervention", "eval"]
    written = []
    while len(written) < 3:
        for ep in col.step(random=True).finished:
            if len(written) < 3:
                ep = type(ep)(
                    dataclasses.replace(ep.info, source=sources[len(written)]), ep.steps, ep.final
                )
                ep.steps["intervention"][:] = ep.info.source == "intervention"
                store.write(ep)
                written.append(ep)
    fresh = OffPolicyLearner(cfg, env.spec)
    fresh.online_reward = lambda ep: np.full(len(ep), -7.0)
    assert fresh.refill(tmp_path / "eps") == 2  # online + intervention; never eval
    ring = fresh.replay.rings["online"]
    assert (
        fresh.replay.size("online") == len(written[0]) + len(written[1]) + 2
    )  # + each final observation
    assert ring.has_tr.sum() == len(written[0]) + len(written[1])
    assert np.all(ring.reward[ring.has_tr] == -7.0)
    assert ring.intervention[ring.has_tr].sum() == len(written[1])
    assert fresh.env_steps == 0  # counted before the restart
