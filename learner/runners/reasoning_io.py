"""Files of a reasoning run: prepared data and tokenizer, the learning curve (CSV + PNG)."""

from __future__ import annotations

import csv
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from learner.llm.datasets import PromptExample, load_prompts
from learner.runners.reasoning_config import ReasoningConfig

__all__ = ["RunData", "prepare_data", "write_curve"]

log = logging.getLogger(__name__)


@dataclass
class RunData:
    tokenizer_dir: str
    train: list[PromptExample]
    eval: list[PromptExample]
    demos: list[dict[str, str]]
    eval_path: str | None = None


def prepare_data(cfg: ReasoningConfig, out_dir: Path) -> RunData:
    """Generate the synthetic task if asked, train the tokenizer for a tiny model, load files."""
    d = cfg.data
    train_path, eval_path, sft_path = d.train_path, d.eval_path, d.sft_path
    if d.synthetic == "arithmetic":
        from learner.llm.arithmetic import write_arithmetic_data

        paths = write_arithmetic_data(out_dir / "data", d.arithmetic)
        train_path = train_path or str(paths["train"])
        eval_path = eval_path or str(paths["heldout"])
        sft_path = sft_path or str(paths["demos"])
    if cfg.model.path is not None:
        tok_dir = cfg.model.path
    else:
        from learner.llm.tokenizer import train_tokenizer

        corpus: list[str] = []
        if d.synthetic == "arithmetic":
            from learner.llm.arithmetic import tokenizer_corpus

            corpus = tokenizer_corpus(d.arithmetic)
        for path in (train_path, sft_path):
            if path:
                corpus += [json.dumps(json.loads(line)) for line in Path(path).read_text().splitlines() if line.strip()]
        tok = train_tokenizer(corpus, vocab_size=d.tokenizer_vocab)
        tok_dir = str(out_dir / "tokenizer")
        tok.save_pretrained(tok_dir)
    assert train_path is not None  # validated by DataConfig
    train = load_prompts(train_path, d.prompt_key, d.answer_key)
    evals = load_prompts(eval_path, d.prompt_key, d.answer_key) if eval_path else train[: max(1, len(train) // 10)]
    if d.eval_limit:
        evals = evals[: d.eval_limit]
    demos = []
    if sft_path and cfg.sft.steps > 0:
        demos = [json.loads(x) for x in Path(sft_path).read_text().splitlines() if x.strip()]
    return RunData(tok_dir, train, evals, demos, str(Path(eval_path).resolve()) if eval_path else None)


def write_curve(rows: list[dict[str, Any]], out_dir: Path, title: str = "held-out greedy accuracy") -> dict[str, str]:
    """``curve.csv`` (one row per logged step) and ``curve.png`` (accuracy and reward vs time)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for r in rows for k in r}, key=lambda k: (k not in ("step", "phase", "elapsed_s"), k))
    csv_path = out_dir / "curve.csv"
    with csv_path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    png_path = out_dir / "curve.png"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        ev = [r for r in rows if "eval/accuracy" in r]
        ax.plot([r["elapsed_s"] for r in ev], [r["eval/accuracy"] for r in ev], "o-", label="held-out greedy accuracy (first point: before SFT)")
        tr = [r for r in rows if "rollout/reward" in r]
        ax.plot([r["elapsed_s"] for r in tr], [r["rollout/reward"] for r in tr], ".-", alpha=0.6, label="train sample reward")
        sft_end = [r["elapsed_s"] for r in rows if r.get("phase") == "sft"]
        if sft_end:
            ax.axvline(max(sft_end), color="gray", ls="--", label="SFT warm-up ends, GRPO starts")
        ax.set_xlabel("wall-clock seconds")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(title)
        ax.legend(loc="center left", fontsize=8)
        fig.tight_layout()
        fig.savefig(png_path, dpi=100)
        plt.close(fig)
    except ImportError:  # matplotlib is in the llm extra; the CSV is the record
        log.warning("matplotlib not installed; wrote %s only", csv_path)
        return {"csv": str(csv_path)}
    return {"csv": str(csv_path), "png": str(png_path)}
