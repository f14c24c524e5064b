"""``rlinf eval`` for LLM checkpoints: greedy accuracy of a saved model on a prompt dataset.

Reads the checkpoint written by the reasoning runner (HF safetensors + tokenizer + meta.json);
the dataset, reward function, prompt format and response length default to the run's own
settings from ``meta.json`` so ``rlinf eval runs/<name>`` needs no flags.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["evaluate_llm_checkpoint"]


def _meta(path: Path) -> dict[str, Any]:
    f = path / "meta.json"
    return json.loads(f.read_text()) if f.is_file() else {}


def evaluate_llm_checkpoint(
    path: str,
    dataset: str | None = None,
    episodes: int | None = None,
    reward: str | None = None,
    prompt_format: str | None = None,
    max_new_tokens: int | None = None,
    batch_size: int = 256,
    return_samples: bool = False,
) -> dict[str, Any]:
    """Accuracy (reward > 0.5) of greedy responses on ``dataset``; ``episodes`` caps the prompts.

    Returns ``{"accuracy", "correct", "n", "dataset", "reward", "seconds"}`` (+ ``samples``:
    prompt / response / answer / score rows when ``return_samples``).
    """
    import torch

    from learner.llm.datasets import apply_template, load_prompts
    from learner.llm.model import load_model
    from learner.llm.rewards import score_batch
    from learner.llm.rollout import ROLLOUT_BACKENDS, SamplingParams

    ckpt = Path(path)
    meta = _meta(ckpt)
    cfg = meta.get("config", {})
    data_cfg, roll_cfg = cfg.get("data", {}), cfg.get("rollout", {})
    dataset = dataset or meta.get("eval_path") or data_cfg.get("eval_path")
    if not dataset:
        raise ValueError(
            f"{ckpt}: no dataset given and meta.json names none; pass --dataset FILE.jsonl"
        )
    reward = reward or next(iter(cfg.get("reward", {}).get("weights", {"exact_match": 1.0})))
    fmt = prompt_format or data_cfg.get("prompt_format", "raw")
    max_new = max_new_tokens or roll_cfg.get("max_new_tokens", 256)
    examples = load_prompts(
        dataset,
        data_cfg.get("prompt_key", "prompt"),
        data_cfg.get("answer_key", "answer"),
        limit=episodes,
    )
    model, tok = load_model(ckpt, cfg.get("model", {}).get("dtype", "float32"))
    backend = ROLLOUT_BACKENDS.get("hf")(
        model, tok, device="cuda" if torch.cuda.is_available() else "cpu"
    )
    greedy = SamplingParams(temperature=0.0, max_new_tokens=max_new)
    t0 = time.perf_counter()
    texts: list[str] = []
    for s in range(0, len(examples), batch_size):
        chunk = examples[s : s + batch_size]
        prompts = [apply_template(tok, e.prompt, fmt, data_cfg.get("system_prompt")) for e in chunk]
        texts += backend.generate(prompts, greedy).texts
    scores = score_batch(reward, texts, [e.answer for e in examples])
    correct = sum(x > 0.5 for x in scores)
    result: dict[str, Any] = {
        "accuracy": correct / len(examples),
        "correct": correct,
        "n": len(examples),
        "dataset": str(dataset),
        "reward": reward,
        "checkpoint": str(ckpt),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if return_samples:
        result["samples"] = [
            {"prompt": e.prompt, "response": t, "answer": e.answer, "score": sc}
            for e, t, sc in zip(examples, texts, scores)
        ]
    return result
