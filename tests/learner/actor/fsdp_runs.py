"""Checks the fsdp CLI tests share: a sharded run's shards against its single file, and
``rlinf eval RUN`` scoring the run's final checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.cli_procs import rlinf


def assert_shards_convert_to_the_single_file(ckpt: Path, out: Path) -> None:
    """One shard per rank (two ranks), and the single file rebuilt from the shards alone equals
    the one rank 0 gathered, key for key."""
    from learner.actor.fsdp_convert import convert_sharded
    from learner.checkpoint import load_checkpoint

    assert len(list((ckpt / "sharded").glob("*.distcp"))) == 2  # one per rank
    a, b = load_checkpoint(ckpt), load_checkpoint(convert_sharded(ckpt, out))
    assert a.model_state.keys() == b.model_state.keys()
    for key, value in a.model_state.items():
        assert torch.equal(value, b.model_state[key]), key


def eval_final_checkpoint(run: Path) -> Path:
    """``rlinf eval RUN`` for 2 episodes; it must score the run's final checkpoint (returned)."""
    from learner.metrics import read_metrics

    ev = rlinf("eval", str(run), "--episodes", "2", "--no-video", "eval.num_envs=2", timeout=200)
    assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
    result = json.loads(ev.stdout[ev.stdout.index("{") :])
    ckpt = Path(read_metrics(run)["final"]["checkpoint"])
    assert Path(result["checkpoint"]) == ckpt and result["episodes"] == 2
    return ckpt
