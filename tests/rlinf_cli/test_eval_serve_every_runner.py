"""Every runner writes one run-directory format; rlinf eval / rlinf serve take its checkpoint.

Each runner trains once, tiny (a few updates, two or three episodes), through ``rlinf train``; then
``rlinf eval`` scores its checkpoint and a real ``rlinf serve`` process answers one request of the
project's policy client. Learning is the benchmarks' business: these check the plumbing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from learner.checkpoint import load_checkpoint, load_policy
from learner.metrics import CHECKPOINTS, FINAL_KEYS, ROW_KEYS, SHARED_KEYS, read_metrics
from policy_server.client import PolicyClient
from rlinf_cli.main import main
from tests.cli_procs import served

pytestmark = pytest.mark.sim
ROOT = Path(__file__).resolve().parents[2]
QUIET = ["train.progress=false", "eval.video=false", "eval.episodes=2", "eval.num_envs=2"]
PUSH = ["env.num_envs=2"]
OFFPOLICY = [
    *PUSH,
    "train.env_steps=120",
    "train.warmup_steps=40",
    "train.learning_starts=40",
    "train.log_every=40",
    "algorithm.batch_size=16",
    "model.hidden=[16]",
    "model.critic_hidden=[16]",
    "train.tensorboard=false",
]
OFFLINE = [
    *PUSH,
    "train.updates=6",
    "train.log_every=3",
    "algorithm.batch_size=16",
    "model.hidden=[16]",
]
VLA = [
    "env.kwargs.image_size=32",
    "model.kwargs.text_encoder=hash",
    "model.hidden=[32]",
    "model.image_feat_dim=16",
    "model.cnn_channels=[8,8,8]",
    "sft.steps=3",
    "train.log_every=3",
    "sft.batch_size=8",
]


def _collect(out: Path, env: str, episodes: int, *options: str) -> str:
    assert main(["collect", env, "--episodes", str(episodes), "--out", str(out), *options]) == 0
    return str(out)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    """Demo stores: oracle push episodes (state), language demos (state + rgb), lift frames."""
    tmp = tmp_path_factory.mktemp("data")
    return {
        "push": _collect(
            tmp / "push", "mujoco_franka/push", 3, "--noise", "0.1", "control=ee_delta_pos"
        ),
        "lang": _collect(
            tmp / "lang",
            "franka_language/mix",
            2,
            "--obs-mode",
            "state+rgb",
            "--noise",
            "0.1",
            "cameras=[front]",
            "image_size=32",
        ),
        "frames": _collect(
            tmp / "frames",
            "mujoco_franka/lift",
            4,
            "--seed",
            "1",
            "--obs-mode",
            "rgb",
            "cameras=third",
            "image_size=32",
        ),
    }


# runner -> (config, overrides given the demo stores)
RUNS = {
    "ppo": ("sim_franka_reach_ppo", lambda d: ["train.iterations=1", "train.tensorboard=false"]),
    "sac": ("sim_franka_push_sac", lambda d: OFFPOLICY),
    "rlpd": ("sim_franka_push_rlpd", lambda d: [*OFFPOLICY, f"train.demos={d['push']}"]),
    "bc": ("sim_franka_push_bc", lambda d: [*OFFLINE, f"data.demos={d['push']}"]),
    "iql": ("sim_franka_push_iql", lambda d: [*OFFLINE, f"data.demos={d['push']}"]),
    "dagger": (
        "sim_franka_push_dagger",
        lambda d: [
            *OFFLINE,
            f"data.demos={d['push']}",
            "algorithm.rounds=1",
            "algorithm.round_env_steps=20",
        ],
    ),
    "vla_sft": ("sim_franka_language_vla_tokens_sft", lambda d: [*VLA, f"sft.demos={d['lang']}"]),
    "reward_classifier": (
        "reward_classifier",
        lambda d: [
            f"data.store={d['frames']}",
            "train.epochs=2",
            "model.channels=[4,4]",
            "model.hidden=8",
        ],
    ),
}


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory) -> dict[str, Path]:
    """Every runner trained once, through ``rlinf train``; name -> run directory."""
    out = {}
    for name, (config, overrides) in RUNS.items():
        run = tmp_path_factory.mktemp("runs") / name
        quiet = [] if name == "reward_classifier" else QUIET
        argv = ["train", f"configs/{config}.yaml", f"train.out_dir={run}", *quiet, *overrides(data)]
        assert main(argv) == 0, name
        out[name] = run
    return out


def test_every_runner_writes_one_run_directory_format(runs) -> None:
    """Same layout, same top-level schema, same names for the same things, one plotter."""
    runners = {}
    for name, run in runs.items():
        doc = read_metrics(run)
        assert set(doc) == {"final", "history"}, name
        final, history = doc["final"], doc["history"]
        assert all(k in final for k in FINAL_KEYS), (name, sorted(final))
        assert history and all(all(k in row for k in ROW_KEYS) for row in history), name
        assert Path(final["out_dir"]) == run and (run / "curves.png").stat().st_size > 1000, name
        assert final["curves"] == str(run / "curves.png"), name
        ckpt = Path(final["checkpoint"])
        assert ckpt.parent == run / CHECKPOINTS and ckpt.name.startswith("iter_"), name
        assert load_checkpoint(run).path == ckpt, name  # the run dir resolves to its checkpoint
        assert load_checkpoint(ckpt).meta["runner"] == final["runner"], name
        rows = [r["time/wall_s"] for r in history]
        assert rows == sorted(rows), name
        runners[name] = final["runner"]
        for row in history:  # a shared quantity is a number wherever a runner has it
            assert all(isinstance(row[k], (int, float)) for k in SHARED_KEYS if k in row), name
    assert runners == {
        "ppo": "embodied",
        "sac": "offpolicy",
        "rlpd": "offpolicy",
        "bc": "offline",
        "iql": "offline",
        "dagger": "offline",
        "vla_sft": "vla_sft",
        "reward_classifier": "reward_classifier",
    }
    for name in ("ppo", "sac", "rlpd"):
        assert "env_steps" in read_metrics(runs[name])["history"][-1], name
    for name in ("sac", "rlpd", "bc", "iql", "dagger", "vla_sft", "reward_classifier"):
        assert read_metrics(runs[name])["history"][-1]["updates"] > 0, name
    for name in ("ppo", "sac", "rlpd", "bc", "iql", "dagger", "vla_sft"):
        assert read_metrics(runs[name])["final"]["eval"]["id"]["episodes"] == 2, name
    assert 0.0 <= read_metrics(runs["reward_classifier"])["final"]["eval"]["val"]["accuracy"] <= 1.0


@pytest.mark.parametrize("name", list(RUNS))
def test_rlinf_eval_takes_the_checkpoint(runs, name, capsys) -> None:
    run = runs[name]
    capsys.readouterr()
    argv = ["eval", str(run), "--episodes", "2", "--no-video", "eval.num_envs=2"]
    if name == "reward_classifier":
        argv = ["eval", str(run)]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    ckpt = Path(read_metrics(run)["final"]["checkpoint"])
    assert Path(result["checkpoint"]) == ckpt
    assert (run / "evals" / f"{ckpt.name}_seed0" / "results.json").is_file()
    if name == "reward_classifier":
        val = read_metrics(run)["final"]["eval"]["val"]
        # the run's own held-out split, scored again: the same frames and the same accuracy
        assert result["split"] == "val" and result["frames"] > 0
        assert result["accuracy"] == pytest.approx(val["accuracy"])
    else:
        assert result["episodes"] == 2 and 0.0 <= result["success_rate"]["id"] <= 1.0


def _observation(policy) -> dict:
    spec = policy.spec
    obs: dict = {"state": np.zeros(spec.state_dim, np.float32)}
    if spec.cameras:
        obs["images"] = {c: np.zeros((h, w, 3), np.uint8) for c, (h, w) in spec.cameras.items()}
    if spec.uses_instruction:
        obs["instruction"] = "push the red cube"
    return obs


@pytest.mark.parametrize("name", list(RUNS))
def test_rlinf_serve_answers_with_the_checkpoint(runs, name) -> None:
    ckpt = Path(read_metrics(runs[name])["final"]["checkpoint"])
    policy, meta = load_policy(ckpt)
    # the run directory: its latest checkpoint is served
    with served(runs[name]) as port, PolicyClient(f"ws://127.0.0.1:{port}") as client:
        out = client.infer(_observation(policy))
    assert out["actions"].shape == (policy.spec.chunk, policy.spec.action_dim), name
    assert client.metadata.policy_name == meta["model"]["name"]
