"""``actor.strategy: fsdp`` end to end through the CLI, as a user runs it.

``rlinf train`` runs the embodied PPO config with two actor ranks (``env,rollout,actor: 0-1`` on
a two-slot cluster: two fused processes, one gloo group) and FSDP2: the initial publish, every
iteration's update and publish, and the final save all need both ranks. Then ``rlinf eval RUN``
scores the checkpoint, a real ``rlinf serve --checkpoint RUN`` answers one request of the
project's policy client, and the sharded directory converts back to the single-file weights rank
0 wrote. The LLM actor's counterpart is tests/learner/llm/test_llm_fsdp_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.cli_procs import rlinf, served
from tests.learner.actor.fsdp_runs import (
    assert_shards_convert_to_the_single_file,
    eval_final_checkpoint,
)

TRAIN = [
    "configs/sim_franka_reach_ppo.yaml",
    "placement={'env,rollout,actor': '0-1'}",
    "cluster.num_cpus=2",
    "actor.strategy=fsdp",
    "env.num_envs=4",
    "rollout.steps_per_iteration=8",
    "train.iterations=2",
    "train.checkpoint_every=0",
    "train.progress=false",
    "train.tensorboard=false",
    "eval.episodes=2",
    "eval.num_envs=2",
    "eval.video=false",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fsdp_cli") / "run"
    train = rlinf("train", *TRAIN, f"train.out_dir={out}")
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.sim
def test_train_writes_both_ranks_shards_and_the_single_file_weights(run) -> None:
    from learner.metrics import read_metrics

    metrics = read_metrics(run)
    assert [r["iteration"] for r in metrics["history"]] == [0, 1]
    assert metrics["history"][-1]["weight_version"] > metrics["history"][0]["weight_version"]
    ckpt = Path(metrics["final"]["checkpoint"])
    assert_shards_convert_to_the_single_file(ckpt, run / "converted")


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.sim
def test_rlinf_eval_and_serve_take_the_fsdp_run(run) -> None:
    from learner.checkpoint import load_policy
    from policy_server.client import PolicyClient

    policy, meta = load_policy(eval_final_checkpoint(run))
    with served(run) as port, PolicyClient(f"ws://127.0.0.1:{port}") as client:
        out = client.infer({"state": np.zeros(policy.spec.state_dim, np.float32)})
    assert out["actions"].shape == (policy.spec.chunk, policy.spec.action_dim)
    assert client.metadata.policy_name == meta["model"]["name"]


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.sim
def test_train_resume_goes_on_from_the_fsdp_run_s_shards(run, tmp_path) -> None:
    """``train.resume`` of the sharded run, on two ranks again: each rank loads its own shard of
    the model and optimiser, the history and the weight versions go on from the checkpoint."""
    import shutil

    from learner.metrics import read_metrics

    out = tmp_path / "resumed"
    shutil.copytree(run, out)
    before = read_metrics(out)["history"]
    args = [a for a in TRAIN if not a.startswith("train.iterations=")]
    res = rlinf("train", *args, "train.iterations=3", f"train.out_dir={out}", f"train.resume={out}")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "resumed from" in res.stdout + res.stderr
    after = read_metrics(out)
    assert [r["iteration"] for r in after["history"]] == [0, 1, 2]
    assert after["history"][:2] == before  # the earlier rows kept, not a fresh run's
    assert after["history"][-1]["weight_version"] > before[-1]["weight_version"]
    ckpt = Path(after["final"]["checkpoint"])
    assert ckpt.name == "iter_000003"  # named by the iterations done: 2 before, 1 more now
    assert len(list((ckpt / "sharded").glob("*.distcp"))) == 2
