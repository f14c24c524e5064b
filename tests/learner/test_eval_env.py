"""``eval.env``: RL may train on one task mix and report success on another of the same family
(the VLA recipe trains PPO on ``franka_language/hard`` and reports ``franka_language/mix``)."""

from __future__ import annotations

import pytest

import learner.eval.embodied as embodied
from learner.actor.trainer import policy_spec
from learner.models import build_policy
from learner.rollout.envs import build_env
from learner.runners.config import EmbodiedConfig
from rlinf_contracts.config import ConfigError, from_dict


def _cfg(**eval_kw) -> EmbodiedConfig:
    return from_dict(EmbodiedConfig, {"env": {"name": "franka_language/hard", "obs_mode": "state", "num_envs": 2},
                                      "model": {"name": "mlp"}, "eval": {"num_envs": 2, **eval_kw}})


@pytest.mark.parametrize("eval_env, expected", [("franka_language/mix", "franka_language/mix"),
                                                ("", "franka_language/hard")])
def test_eval_runs_on_eval_env_with_the_training_env_kwargs(monkeypatch, eval_env, expected):
    built = []

    def spy(name, n, **kw):
        built.append((name, kw.get("obs_mode")))
        return build_env(name, n, **kw)

    monkeypatch.setattr(embodied, "build_env", spy)
    cfg = _cfg(env=eval_env)
    env = build_env(cfg.env.name, 1, **cfg.env.factory_kwargs())
    try:
        policy = build_policy("mlp", policy_spec(cfg, env.spec))
    finally:
        env.close()
    out = embodied.evaluate_config(policy, cfg, episodes=2, seed=0, ood_splits=["id", "semantic"])
    assert set(out) == {"id", "semantic"} and all(r["episodes"] == 2 for r in out.values())
    assert built == [(expected, "state"), (expected, "state")]


def test_eval_env_must_be_a_task_of_the_same_family():
    with pytest.raises(ConfigError, match="eval.env"):
        _cfg(env="mujoco_franka/reach").validate()
    with pytest.raises(ConfigError, match="family/task"):
        _cfg(env="mix").validate()
