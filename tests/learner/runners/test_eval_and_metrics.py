"""Held-out evaluation (rounds, splits, video, overrides) and the metrics logger, without Ray."""

from __future__ import annotations

import json

import numpy as np
import pytest

from learner.actor.trainer import make_policy, policy_spec
from learner.checkpoint import checkpoint_dir, save_checkpoint
from learner.eval.embodied import evaluate_checkpoint, evaluate_policy
from learner.metrics import MetricsLogger
from learner.rollout.envs import build_env
from learner.runners.config import EmbodiedConfig
from rlinf_contracts.config import from_dict, to_dict


class _GoalSeeker:
    """A scripted 'policy' (PD toward the goal) that succeeds on the toy env."""

    def act(self, obs, deterministic=True):
        s = obs["state"]
        a = np.clip(s[:, 4:6] * 20 - s[:, 2:4] * 40, -1, 1)[:, None, :].astype(np.float32)
        return a, np.zeros(len(s)), None


def test_eval_runs_exactly_the_requested_episodes_and_writes_video(tmp_path) -> None:
    out = evaluate_policy(
        _GoalSeeker(),
        "toy/point_reach",
        {"max_episode_steps": 40},
        episodes=5,
        seed=1_000_000_000,
        num_envs=2,
        video_path=str(tmp_path / "e.mp4"),
        video_episodes=2,
    )
    assert out["episodes"] == 5 and out["success_rate"] == 1.0 and out["episode_length"] < 40
    import imageio.v2 as imageio

    frames = [f for f in imageio.get_reader(out["video"])]
    assert frames[0].shape == (64, 128, 3)  # two envs side by side at the env's 64 px render size
    assert len(frames) > 3 * 5  # three rounds, each held for 5 frames at its end


def test_eval_checkpoint_uses_config_defaults_splits_and_overrides(tmp_path) -> None:
    cfg = from_dict(
        EmbodiedConfig,
        {
            "env": {"num_envs": 4, "max_episode_steps": 8},
            "eval": {"episodes": 4, "num_envs": 2, "ood_splits": ["id", "far"]},
        },
    )
    policy = make_policy(cfg, policy_spec(cfg, build_env(cfg.env.name, 1).spec))
    path = save_checkpoint(
        checkpoint_dir(tmp_path, 3), policy, iteration=3, weight_version=4, config=to_dict(cfg)
    )
    report = evaluate_checkpoint(
        str(path), overrides={"eval.num_envs": 4, "env": {"max_episode_steps": 5}}
    )
    assert report["iteration"] == 3 and report["episodes"] == 4 and report["seed"] == 0
    assert set(report["splits"]) == {"id", "far"}
    assert all(v["episode_length"] <= 5 for v in report["splits"].values())  # override applied
    assert (path / "eval.mp4").exists() and (
        path / "eval_far.mp4"
    ).exists()  # default: next to the checkpoint
    none = evaluate_checkpoint(str(tmp_path), episodes=2, ood_splits=["id"], video_path="")
    assert "video" not in none["splits"]["id"] and none["episodes"] == 2
    with pytest.raises(ValueError, match="ood split"):
        evaluate_checkpoint(str(path), episodes=1, ood_splits=["nonsense"], video_path="")


def test_metrics_logger_writes_tensorboard_and_json(tmp_path) -> None:
    logger = MetricsLogger(tmp_path, total=2, tensorboard=True, progress=False)
    logger.log(0, {"success_rate": 0.5, "train/loss": 1.0, "note": "text", "bad": float("nan")})
    logger.log(1, {"success_rate": 0.75})
    path = logger.write_json({"success_rate": 0.75})
    logger.close()
    data = json.loads(path.read_text())
    assert data["final"] == {"success_rate": 0.75}
    assert data["history"][0] == {"iteration": 0.0, "success_rate": 0.5, "train/loss": 1.0}
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_progress_bar_shows_the_time_left_under_a_wall_clock_budget(tmp_path) -> None:
    """A run the budget ends shows when it will stop, not tqdm's ETA for its step count."""
    logger = MetricsLogger(tmp_path, total=200, tensorboard=False, progress=True, time_budget_s=300)
    logger.log(0, {"success_rate": 0.25})
    post = str(logger.bar.postfix)  # type: ignore[union-attr]  # progress=True: a bar
    logger.close()
    assert "succ=0.25" in post and ("budget_left=4:5" in post or "budget_left=5:00" in post), post
    plain = MetricsLogger(tmp_path / "b", total=2, tensorboard=False, progress=True)
    plain.log(0, {"success_rate": 0.25})
    assert "budget_left" not in str(plain.bar.postfix)  # type: ignore[union-attr]  # progress=True: a bar
    plain.close()


class _PushDown:
    """Drives the held peg straight down, onto the fixture or into the hole."""

    def act(self, obs, deterministic=True):
        a = np.tile(np.array([0.0, 0.0, -1.0, -1.0], np.float32), (len(obs["state"]), 1, 1))
        return a, np.zeros(len(a)), None


@pytest.mark.sim
def test_eval_reports_the_peak_contact_force_of_envs_that_measure_it() -> None:
    out = evaluate_policy(
        _PushDown(),
        "mujoco_franka/insert",
        {"control": "ee_impedance", "max_episode_steps": 15},
        episodes=2,
        seed=1_000_000_000,
        num_envs=2,
    )
    assert out["peak_contact_force_n_max"] >= out["peak_contact_force_n_median"] > 0.0
    toy = evaluate_policy(
        _GoalSeeker(), "toy/point_reach", {"max_episode_steps": 40}, episodes=2, seed=0, num_envs=2
    )
    assert not [k for k in toy if k.startswith("peak_")]  # a task without contact says nothing


class _NoisyGoalSeeker(_GoalSeeker):
    """The goal seeker, plus torch-sampled noise when asked not to be deterministic: what a
    stochastic actor does, so the eval's sampled mode shows in its episodes."""

    def act(self, obs, deterministic=True):
        import torch

        a, logp, x = super().act(obs, deterministic)
        if not deterministic:
            a = np.clip(a + 3.0 * torch.randn(a.shape).numpy(), -1, 1).astype(np.float32)
        return a, logp, x


def test_eval_samples_actions_with_eval_deterministic_false_reproducibly() -> None:
    def run(deterministic: bool) -> dict:
        return evaluate_policy(
            _NoisyGoalSeeker(),
            "toy/point_reach",
            {"max_episode_steps": 40},
            episodes=6,
            seed=1_000_000_000,
            num_envs=3,
            deterministic=deterministic,
        )

    mode, sampled, again = run(True), run(False), run(False)
    assert mode["success_rate"] == 1.0
    assert sampled["episode_length"] != mode["episode_length"]  # the noise reached the env
    assert sampled == again  # seeded per round: the same held-out figure every time
