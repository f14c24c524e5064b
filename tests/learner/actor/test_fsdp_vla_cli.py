"""A tiny VLA trained with ``actor.strategy: fsdp`` through the CLI, evaluated and served.

Per family (the tiny OpenVLA adapter with PPO, the tiny π0 adapter with GRPO), ``rlinf train``
runs the tiny config with two actor ranks (``env,rollout,actor: 0-1`` on a two-slot cluster: two
fused processes, one gloo group) and FSDP2: every update, publish and the final save need both
ranks. The trainable weights (LoRA, heads) moved and the frozen backbone did not; the shards
convert back to the single file rank 0 gathered; ``rlinf eval RUN`` scores the checkpoint; a real
``rlinf serve --checkpoint RUN`` answers the project's policy client with the actions the
converted checkpoint computes. The update's numbers against one process:
tests/learner/actor/test_fsdp_vla.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.cli_procs import rlinf, served
from tests.learner.actor.fsdp_runs import (
    assert_shards_convert_to_the_single_file,
    eval_final_checkpoint,
)

pytest.importorskip("transformers")
pytest.importorskip("peft")

COMMON = [
    "placement={'env,rollout,actor': '0-1'}",
    "cluster.num_cpus=2",
    "actor.strategy=fsdp",
    "env.num_envs=4",
    "train.iterations=2",
    "train.checkpoint_every=0",
    "train.progress=false",
    "eval.episodes=2",
    "eval.num_envs=2",
    "eval.ood_splits=[id]",
    "eval.video=false",
]
FAMILIES = {
    "openvla": [
        "configs/sim_franka_language_openvla_tiny_ppo.yaml",
        "rollout.steps_per_iteration=4",
    ],
    "pi0": ["configs/sim_franka_language_pi0_tiny_grpo.yaml"],
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def run(request, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp(f"fsdp_vla_cli_{request.param}") / "run"
    train = rlinf("train", *FAMILIES[request.param], *COMMON, f"train.out_dir={out}")
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    return out


def _request(spec) -> dict:
    rng = np.random.default_rng(1)
    ((cam, (h, w)),) = spec.cameras.items()
    return {
        "state": rng.normal(size=spec.state_dim).astype(np.float32),
        "images": {cam: rng.integers(0, 255, (h, w, 3), dtype=np.uint8)},
        "instruction": "push the red cube",
    }


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.sim
def test_two_fsdp_ranks_train_the_adapter_and_write_shards(run) -> None:
    from learner.checkpoint import load_checkpoint
    from learner.metrics import read_metrics
    from learner.models import PolicySpec, build_policy
    from learner.rollout.collect import derive_seed

    metrics = read_metrics(run)
    history = metrics["history"]
    assert [r["iteration"] for r in history] == [0, 1]
    assert all(r["train/grad_norm"] > 0 for r in history)  # real updates on both iterations
    assert history[-1]["weight_version"] > history[0]["weight_version"]
    ckpt = load_checkpoint(Path(metrics["final"]["checkpoint"]))
    # the gathered weights: LoRA / heads moved, the frozen backbone is the initial one
    spec = PolicySpec.from_dict(ckpt.meta["spec"])
    torch.manual_seed(derive_seed(0, "init"))
    init = build_policy("vla_adapter", spec, **ckpt.meta["model"]["kwargs"])
    first = init.state_dict()
    trainable = {k for k, p in init.named_parameters() if p.requires_grad}
    frozen = {k for k, p in init.named_parameters() if not p.requires_grad}
    assert any(not torch.equal(first[k], ckpt.model_state[k]) for k in trainable)
    assert frozen and all(torch.equal(first[k], ckpt.model_state[k]) for k in frozen)
    assert_shards_convert_to_the_single_file(ckpt.path, run / "converted")


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.sim
def test_rlinf_eval_and_serve_take_the_fsdp_vla_run(run) -> None:
    from learner.actor.fsdp_convert import convert_sharded
    from learner.checkpoint import load_policy
    from policy_server.client import PolicyClient
    from policy_server.messages import ServerMetadata

    ckpt = eval_final_checkpoint(run)
    policy, meta = load_policy(convert_sharded(ckpt, run / "converted_for_serve"))
    req = _request(policy.spec)
    batch = {
        "state": req["state"][None],
        "images": {k: v[None] for k, v in req["images"].items()},
        "instruction": [req["instruction"]],
    }
    expected = policy.act(batch, deterministic=True)[0]
    with served(run) as port, PolicyClient(f"ws://127.0.0.1:{port}") as client:
        out = client.infer(req)
    assert isinstance(client.metadata, ServerMetadata)  # one of ours, not a foreign openpi map
    assert client.metadata.policy_name == meta["model"]["name"]
    actions = np.asarray(out["actions"], np.float32)
    assert actions.shape == (policy.spec.chunk, policy.spec.action_dim)
    np.testing.assert_allclose(actions, expected[0], atol=1e-5)
