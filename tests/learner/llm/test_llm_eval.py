"""``evaluate_llm_checkpoint``: accuracy of a saved model's greedy answers on a dataset."""

from __future__ import annotations

import json

import pytest

from learner.eval.llm import evaluate_llm_checkpoint
from learner.llm.datasets import write_jsonl
from learner.llm.model import save_model
from learner.llm.rollout import ROLLOUT_BACKENDS, SamplingParams


def test_accuracy_counts_matching_answers(tiny_model, tiny_tok, tmp_path):
    ckpt = save_model(tiny_model, tiny_tok, tmp_path / "ckpt")
    (ckpt / "meta.json").write_text(
        json.dumps(
            {
                "runner": "reasoning",
                "config": {
                    "reward": {"weights": {"exact_string": 1.0}},
                    "rollout": {"max_new_tokens": 4},
                },
            }
        )
    )
    prompts = [f"{a}+{a}=" for a in range(8)]
    be = ROLLOUT_BACKENDS.get("hf")(tiny_model, tiny_tok)
    own = be.generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=4)).texts
    # references = the model's own greedy answers for the first 6 prompts, wrong for the last 2
    refs = own[:6] + [t + "zz" for t in own[6:]]
    data = write_jsonl(
        tmp_path / "d.jsonl", [{"prompt": p, "answer": r} for p, r in zip(prompts, refs)]
    )
    res = evaluate_llm_checkpoint(str(ckpt), dataset=str(data), return_samples=True)
    assert res["n"] == 8 and res["correct"] == 6 and res["accuracy"] == pytest.approx(0.75)
    assert [s["response"] for s in res["samples"]] == own
    assert evaluate_llm_checkpoint(str(ckpt), dataset=str(data), episodes=3)["n"] == 3


def test_missing_dataset_is_a_clear_error(tiny_model, tiny_tok, tmp_path):
    ckpt = save_model(tiny_model, tiny_tok, tmp_path / "ckpt")
    with pytest.raises(ValueError, match="--dataset"):
        evaluate_llm_checkpoint(str(ckpt))
