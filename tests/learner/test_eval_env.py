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
    return from_dict(
        EmbodiedConfig,
        {
            "env": {"name": "franka_language/hard", "obs_mode": "state", "num_envs": 2},
            "model": {"name": "mlp"},
            "eval": {"num_envs": 2, **eval_kw},
        },
    )


@pytest.mark.parametrize(
    "eval_env, expected",
    [("franka_language/mix", "franka_language/mix"), ("", "franka_language/hard")],
)
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


def test_served_eval_of_a_run_directory_uses_its_eval_env_and_ood_splits(
    tmp_path, monkeypatch, capsys
):
    """``rlinf eval RUN --policy-server URL --ood id,semantic``: the env the run was scored on
    (``eval.env``), one result per split -- not the training env, not the splits dropped."""
    import json

    import policy_server.sim_eval as sim_eval
    from learner.checkpoint import checkpoint_dir, save_checkpoint
    from policy_server.background import ServerThread
    from policy_server.server import PolicyServer
    from rlinf_cli.main import build_parser, main, parse_args
    from rlinf_cli.serve import build_config, load_served_policy
    from rlinf_contracts.config import to_dict

    cfg = _cfg(env="franka_language/mix", episodes=2)
    env = build_env(cfg.env.name, 1, **cfg.env.factory_kwargs())
    try:
        policy = build_policy("mlp", policy_spec(cfg, env.spec))
    finally:
        env.close()
    save_checkpoint(
        checkpoint_dir(tmp_path / "run", 1),
        policy,
        iteration=1,
        weight_version=1,
        config=to_dict(cfg),
    )
    built = []
    real = sim_eval.make_env
    monkeypatch.setattr(
        sim_eval,
        "make_env",
        lambda name, **kw: built.append((name, kw.get("ood"))) or real(name, **kw),
    )
    serve = build_config(
        parse_args(
            build_parser(),
            ["serve", "--checkpoint", str(tmp_path / "run"), "--host", "127.0.0.1", "--port", "0"],
        )
    )  # rlinf serve's loading path
    served, version, name = load_served_policy(serve)
    with ServerThread(
        PolicyServer(served, serve.server, weight_version=version, policy_name=name)
    ) as srv:
        assert (
            main(
                [
                    "eval",
                    str(tmp_path / "run"),
                    "--policy-server",
                    srv.url,
                    "--ood",
                    "id,semantic",
                    "--out",
                    str(tmp_path / "out"),
                ]
            )
            == 0
        )
        # a typo in a split name is a config error naming it, not a traceback from the env factory
        assert (
            main(
                ["eval", str(tmp_path / "run"), "--policy-server", srv.url, "--ood", "id,semnatic"]
            )
            == 2
        )
    assert "ood split 'semnatic' unknown" in capsys.readouterr().err
    report = json.loads((tmp_path / "out" / "results.json").read_text())
    assert report["env"] == "franka_language/mix" and set(report["success_rate"]) == {
        "id",
        "semantic",
    }
    assert built[:2] == [
        ("franka_language/mix", None),
        ("franka_language/mix", "semantic"),
    ]  # then the typo run


def test_env_name_given_at_eval_time_replaces_the_runs_eval_env():
    """``rlinf eval RUN env.name=franka_language/lift`` on a run scored on ``eval.env=mix``: the
    user names the env to evaluate in; before, the stored eval.env silently won."""
    from rlinf_contracts.config import to_dict

    meta = {"runner": "embodied", "config": to_dict(_cfg(env="franka_language/mix"))}
    assert embodied.checkpoint_config(meta).eval.env == "franka_language/mix"
    cfg = embodied.checkpoint_config(meta, {"env.name": "franka_language/lift"})
    assert cfg.env.name == "franka_language/lift" and not cfg.eval.env
    cfg = embodied.checkpoint_config(
        meta, {"env": {"name": "franka_language/lift"}, "eval.env": "franka_language/push"}
    )
    assert cfg.eval.env == "franka_language/push"  # both named: the user's eval.env stands
