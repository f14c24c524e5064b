"""The language-conditioned Franka family: instructions, OOD splits, oracle success."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts.env_registry import make_env
from sim_bridges.mujoco_franka import oracle_action
from sim_bridges.mujoco_franka.language_env import LANGUAGE_SPLITS, parse_language_ood
from sim_bridges.mujoco_franka.tasks.language import COLOURS, VOCAB


def _episodes(env):
    return [env.task.episode(d) for d in env.datas]


def test_instruction_names_the_target_by_its_episode_colour():
    env = make_env("franka_language/mix", 12, obs_mode="state")
    obs = env.reset(seed=5)
    assert len(obs["instruction"]) == 12 and env.spec.state_dim == 24 + 9
    for text, ep in zip(obs["instruction"], _episodes(env)):
        assert ep.colours[ep.target] in text, (text, ep)
        assert len(set(ep.colours)) == 3 and set(ep.colours) <= set(COLOURS)
        assert ep.verb in ("reach", "push", "lift")
    # auto-reset draws a new instruction for the finished row only
    first = list(obs["instruction"])
    obs2 = env.reset(seed=6)
    assert obs2["instruction"] != first


def test_hard_mix_oversamples_push_and_lift():
    counts = {}
    for mix in ("mix", "hard"):
        env = make_env(f"franka_language/{mix}", 200, obs_mode="state")
        env.reset(seed=3)
        verbs = [ep.verb for ep in _episodes(env)]
        counts[mix] = {v: verbs.count(v) / len(verbs) for v in ("reach", "push", "lift")}
    assert counts["mix"]["reach"] > 0.45 and counts["hard"]["reach"] < 0.32, counts
    assert counts["hard"]["lift"] > counts["mix"]["lift"] + 0.1, counts


def test_splits_differ_as_declared():
    train = make_env("franka_language/mix", 16, obs_mode="state+rgb", image_size=32)
    sem = make_env("franka_language/mix", 16, obs_mode="state+rgb", image_size=32, ood="semantic")
    vis = make_env("franka_language/mix", 16, obs_mode="state+rgb", image_size=32, ood="vision")
    pos = make_env("franka_language/mix", 64, obs_mode="state", ood="position")
    o_train, o_sem, o_vis = train.reset(seed=1), sem.reset(seed=1), vis.reset(seed=1)
    # semantic: same scenes (same seed), other words, none of the training colour names
    np.testing.assert_allclose(o_train["state"], o_sem["state"])
    train_words = set(" ".join(o_train["instruction"]).split())
    sem_words = set(" ".join(o_sem["instruction"]).split())
    assert not (sem_words & set(COLOURS)) and set(COLOURS) & train_words
    assert not (sem_words & set(VOCAB["train"]["shape"]))
    # vision: same physics and words, other pixels
    assert o_vis["instruction"] == o_train["instruction"]
    np.testing.assert_allclose(o_vis["state"], o_train["state"])
    assert np.abs(o_vis["images"]["front"].astype(int) - o_train["images"]["front"]).mean() > 5
    # position: objects outside the training box appear
    train_pos = make_env("franka_language/mix", 64, obs_mode="state")

    def spread(env):
        return np.ptp(
            np.concatenate(
                [env.datas[i].qpos[env.fms[i].object_qpos["obj0"] :][:1] for i in range(64)]
            )
        )

    train_pos.reset(seed=2), pos.reset(seed=2)
    assert spread(pos) > 1.3 * spread(train_pos)


@pytest.mark.parametrize("mix", ["mix"])
def test_oracle_succeeds_on_every_verb(mix):
    env = make_env(f"franka_language/{mix}", 24, obs_mode="state")
    env.reset(seed=11)
    eps = _episodes(env)
    done, success = np.zeros(24, bool), np.zeros(24, bool)
    for _ in range(env.spec.max_episode_steps):
        _, _, term, trunc, info = env.step(oracle_action(env))
        new = (term | trunc) & ~done
        success[new] = info["success"][new]
        done |= term | trunc
    verbs = {ep.verb for ep in eps}
    assert verbs == {"reach", "push", "lift"}, verbs
    assert success.mean() >= 0.9, [(ep.verb, s) for ep, s in zip(eps, success)]


def test_do_nothing_does_not_succeed():
    env = make_env("franka_language/mix", 16, obs_mode="state")
    env.reset(seed=3)
    hold = np.zeros((16, 4), np.float32)
    hold[:, 3] = 1.0
    for _ in range(10):
        _, _, term, _, info = env.step(hold)
        assert not info["success"].any()


def test_bad_split_and_mix_name_the_choices():
    with pytest.raises(ValueError, match="semantic"):
        parse_language_ood("semantics")
    with pytest.raises(Exception, match="mix"):
        make_env("franka_language/juggle", 1)
    assert set(LANGUAGE_SPLITS) >= {"id", "vision", "semantic", "position"}
