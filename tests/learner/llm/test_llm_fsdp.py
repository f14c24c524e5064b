"""The reasoning learner on two CPU ranks (gloo), ``actor.strategy`` fsdp or ddp, equals one rank.

One spawn of two ranks runs SFT steps, then a GRPO update on a fixed scored step that only rank 0
is handed (as only rank 0 reads the channel), then a save; rank 0 sends back its losses, metrics
and the gathered weights. The same steps in this process, unsharded, are the reference. Micro
batches of 3 rows over 2 ranks leave one rank a stand-in forward: the sums must still agree. A
KL term (``algorithm.kl_coef``) runs against a frozen reference that is sharded like the actor.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch

from learner.actor.fsdp import FSDPStrategy
from learner.llm.rollout import RolloutBatch
from learner.runners.reasoning import ReasoningConfig
from learner.runners.reasoning_io import prepare_data
from rlinf_contracts.config import ConfigError, from_dict, load_config
from tests.learner.two_ranks import run_two_ranks

ROOT = Path(__file__).resolve().parents[3]
SFT_STEPS = 3


def _cfg(out: Path, strategy: str, *extra: str) -> ReasoningConfig:
    raw = load_config(
        ROOT / "configs/llm_grpo_arith.yaml",
        [
            f"sft.steps={SFT_STEPS}",
            "sft.batch_size=9",  # odd: the ranks' rows differ in number
            "rollout.n=4",
            "actor.micro_batch=3",
            "actor.minibatches=2",
            "actor.ppo_epochs=2",
            "actor.lr=1e-2",
            "data.arithmetic.max_operand=20",
            f"train.out_dir={out}",
            f"actor.strategy={strategy}",
            "algorithm.kl_coef=0.05",
            *extra,
        ],
    )
    return from_dict(ReasoningConfig, raw)


def _step(tokenizer_dir: str, seed: int = 7, n_prompts: int = 5, n: int = 4) -> RolloutBatch:
    """A fixed scored step: random responses of varied lengths, rewards mixed within groups."""
    from learner.llm.tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    rng = random.Random(seed)
    vocab = [i for i in range(len(tok)) if i not in tok.all_special_ids]
    prompts, responses, index, scores = [], [], [], []
    for p in range(n_prompts):
        prompt = tok(f"{p + 3}+{p + 5}=", add_special_tokens=False).input_ids
        for _ in range(n):
            prompts.append(prompt)
            responses.append([rng.choice(vocab) for _ in range(rng.randint(1, 5))])
            index.append(p)
            scores.append(float(rng.random() < 0.5))
    rows = len(responses)
    return RolloutBatch(
        prompts,
        responses,
        [[0.0] * len(r) for r in responses],
        [""] * rows,
        ["length"] * rows,
        index,
        weight_version=0,
        extra={"scores": scores},
    )


def _train(learner: Any, demos: list[dict[str, str]], step: RolloutBatch | None) -> dict:
    sft = learner.sft(demos)
    parts = [learner.receive(step)] if step is not None else []
    metrics = learner.update(learner.collate(parts, version=1))
    return {"sft_loss": sft["sft/loss"], "metrics": metrics}


def _rank(rank: int, port: int, out: str, strategy: str) -> dict[str, Any]:
    from learner.llm.learner import ReasoningLearner

    cfg = _cfg(Path(out), strategy)
    data = prepare_data(cfg, Path(out))
    learner = ReasoningLearner(cfg, data.tokenizer_dir, rank=rank, world_size=2)
    learner.sync.init(f"127.0.0.1:{port}", timeout_s=60)
    learner.trainer.shard()
    res = _train(learner, data.demos, _step(data.tokenizer_dir) if rank == 0 else None)
    # a gather: both ranks call; copies, as the ranks train on (ddp publishes its live tensors)
    res["state"] = {k: v.clone() for k, v in learner.publish_state().items()}
    res["local_numel"] = sum(
        FSDPStrategy.local_shard(p).numel() for p in learner.trainer.model.parameters()
    )
    res["checkpoint"] = learner.save(str(Path(out) / "iter_000001"), 1, 3, {})
    # resume: a second learner of these ranks loads the checkpoint; both take the same next step
    twin = ReasoningLearner(cfg, data.tokenizer_dir, rank=rank, world_size=2)
    twin.init_dist(f"127.0.0.1:{port}")  # the group is up: it joins it
    meta = twin.load(res["checkpoint"])
    counters = (twin.rl_steps, twin.trainer.steps)
    nxt = _step(data.tokenizer_dir, seed=8) if rank == 0 else None
    for each in (learner, twin):
        each.update(each.collate([nxt] if nxt is not None else [], version=2))
    res["resume"] = {
        "meta": meta,
        "steps": counters,
        "went_on": learner.publish_state(),
        "resumed": twin.publish_state(),
    }
    return res


@pytest.fixture(scope="module", params=["fsdp", "ddp"])
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Both strategies on two ranks (ddp: replicated weights, gradients all-reduced by hand)."""
    from learner.llm.learner import ReasoningLearner

    strategy = request.param
    out = tmp_path_factory.mktemp(f"llm_{strategy}")
    sharded = run_two_ranks(_rank, str(out), strategy)
    cfg = _cfg(out / "ref", "ddp")
    data = prepare_data(cfg, out / "ref")
    single = ReasoningLearner(cfg, data.tokenizer_dir)
    ref = _train(single, data.demos, _step(data.tokenizer_dir))
    ref["state"] = single.publish_state()
    ref["numel"] = sum(p.numel() for p in single.trainer.model.parameters())
    return {"ranks": sharded, "ref": ref, "out": out, "strategy": strategy}


def test_sft_and_grpo_losses_equal_single_process(runs) -> None:
    r0, r1, ref = runs["ranks"][0], runs["ranks"][1], runs["ref"]
    assert r0["sft_loss"] == pytest.approx(ref["sft_loss"], rel=1e-5)
    assert r1["sft_loss"] == pytest.approx(ref["sft_loss"], rel=1e-5)  # reduced on every rank
    # the loss and the gradient norm are sums over the rows; the other metrics are means over
    # micro-batches, which the ranks cut differently
    for key in ("actor/loss", "actor/grad_norm"):
        assert r0["metrics"][key] == pytest.approx(ref["metrics"][key], rel=1e-4, abs=1e-6), key
    assert ref["metrics"]["actor/grad_norm"] > 0  # the fixed step carries a real gradient


def test_weights_after_the_steps_equal_single_process(runs) -> None:
    full, ref = runs["ranks"][0]["state"], runs["ref"]["state"]
    assert full.keys() == ref.keys()
    for k in ref:
        torch.testing.assert_close(full[k], ref[k], atol=2e-5, rtol=1e-4, msg=k)
    assert runs["ranks"][1]["state"] == {}  # the weights are published from rank 0 only
    held = runs["ranks"][0]["local_numel"] / runs["ref"]["numel"]
    assert held < 0.6 if runs["strategy"] == "fsdp" else held == 1.0  # sharded, or a full copy


def test_save_writes_shards_and_single_file_that_convert_alike(runs, tmp_path) -> None:
    from learner.actor.fsdp_convert import convert_sharded
    from learner.checkpoint import load_checkpoint
    from learner.eval.llm import evaluate_llm_checkpoint

    ckpt = Path(runs["ranks"][0]["checkpoint"])
    if runs["strategy"] == "ddp":  # rank 0 writes the whole state; nothing is sharded
        assert (ckpt / "model.safetensors").is_file() and not (ckpt / "sharded").exists()
        return
    assert len(list((ckpt / "sharded").glob("*.distcp"))) == 2  # one per rank
    converted = convert_sharded(ckpt, tmp_path / "converted")
    a, b = load_checkpoint(ckpt), load_checkpoint(converted)
    assert a.model_state.keys() == b.model_state.keys()
    for k, v in a.model_state.items():
        assert torch.equal(v, b.model_state[k]), k
    # the converted directory is a whole LLM checkpoint: HF config and tokenizer beside it
    assert (converted / "config.json").is_file() and (converted / "tokenizer.json").is_file()
    heldout = runs["out"] / "data" / "heldout.jsonl"
    res = evaluate_llm_checkpoint(str(converted), dataset=str(heldout), episodes=8)
    assert res["n"] == 8 and 0.0 <= res["accuracy"] <= 1.0


def test_fsdp_refuses_lora_and_the_critic_by_name(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"'actor.strategy'='fsdp' with model.lora_rank"):
        _cfg(tmp_path, "fsdp", "model.lora_rank=4")
    with pytest.raises(ConfigError, match=r"'actor.strategy'='fsdp' with algorithm.adv='gae'"):
        from_dict(
            ReasoningConfig,
            {
                **load_config(ROOT / "configs/llm_ppo_arith.yaml"),
                "actor": {"strategy": "fsdp"},
            },
        )


def test_resumed_ranks_continue_like_uninterrupted_training(runs) -> None:
    """Weights, optimiser (the shards under fsdp), KL reference and counters come back: the
    next step from the checkpoint lands where the uninterrupted ranks land."""
    res = runs["ranks"][0]["resume"]
    assert res["meta"] == {"iteration": 1, "weight_version": 3}
    assert res["steps"] == (1, 4)  # RL updates; RL optimiser steps (2 epochs x 2 mini-batches)
    went_on, resumed = res["went_on"], res["resumed"]
    assert went_on.keys() == resumed.keys()
    for k in went_on:
        torch.testing.assert_close(resumed[k], went_on[k], atol=1e-6, rtol=1e-5, msg=k)
    assert runs["ranks"][1]["resume"]["resumed"] == {}  # gathered on rank 0
