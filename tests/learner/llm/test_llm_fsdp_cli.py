"""An LLM actor trained with ``actor.strategy: fsdp`` through the CLI, evaluated and served.

``rlinf train`` runs the GRPO arithmetic config on worker groups with two actor ranks (one gloo
group, FSDP2): SFT, every RL update, every publish and the final save need both ranks, and the
rollout ranks end on the actor's weights. ``rlinf eval RUN`` scores the checkpoint and a real
``rlinf serve --checkpoint RUN`` answers text completions over HTTP with them.
"""

from __future__ import annotations

import csv
import json
import urllib.request
from pathlib import Path

import pytest

from tests.cli_procs import rlinf, served

TRAIN = [
    "configs/llm_grpo_arith.yaml",
    "placement={'rollout,reward,actor': '0-1'}",
    "cluster.num_cpus=2",
    "train.driver=workers",
    "actor.strategy=fsdp",
    "sft.steps=150",
    "sft.batch_size=64",
    "data.arithmetic.max_operand=20",
    "train.steps=3",
    "train.prompts_per_step=8",
    "train.eval_every=3",
    "data.eval_limit=32",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("llm_fsdp_cli") / "run"
    train = rlinf("train", *TRAIN, f"train.out_dir={out}")
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.ray
def test_two_fsdp_ranks_train_publish_and_write_shards(run) -> None:
    from learner.metrics import read_metrics

    final = read_metrics(run)["final"]
    with open(final["csv"]) as f:
        rl = [r for r in csv.DictReader(f) if r["phase"] == "rl"]
    assert [int(r["step"]) for r in rl] == [1, 2, 3]
    assert any(float(r["actor/grad_norm"]) > 0 for r in rl)  # mixed rewards: real updates
    # every rollout rank ends on the gathered weights of the sharded actor
    assert set(final["rollout_digests"]) == {final["actor_digest"]}
    assert final["actor_digest"] != final["sft_digest"]
    ckpt = Path(final["checkpoint"])
    assert len(list((ckpt / "sharded").glob("*.distcp"))) == 2  # one per rank
    assert (ckpt / "model.safetensors").is_file() and (ckpt / "config.json").is_file()


@pytest.mark.slow
@pytest.mark.ray
def test_rlinf_eval_and_serve_take_the_fsdp_llm_run(run) -> None:
    ev = rlinf("eval", str(run), "--episodes", "16", timeout=200)
    assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
    result = json.loads(ev.stdout[ev.stdout.index("{") :])
    assert result["n"] == 16 and 0.0 <= result["accuracy"] <= 1.0

    with served(run) as port:
        body = json.dumps({"prompt": ["03+04=", "11+05="], "max_tokens": 4, "temperature": 0})
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions", data=body.encode(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            out = json.loads(r.read())
    assert len(out["choices"]) == 2 and all(c["text"] for c in out["choices"])
