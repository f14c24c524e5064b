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

__all__ = ["RunData", "prepare_data", "write_curve", "read_curve"]

log = logging.getLogger(__name__)


@dataclass
class RunData:
    tokenizer_dir: str
    train: list[PromptExample]
    eval: list[PromptExample]
    demos: list[dict[str, str]]
    eval_path: str | None = None
    eval_source: str = "heldout-file"  # or "split-from-train (10%)": named in metrics.json


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
    elif d.synthetic == "toolmath":
        from learner.llm.toolmath import write_toolmath_data

        paths = write_toolmath_data(out_dir / "data", d.toolmath)
        train_path = train_path or str(paths["train"])
        eval_path = eval_path or str(paths["heldout"])
        sft_path = sft_path or str(paths["demos"])
    tok_dir = _tokenizer(cfg, out_dir, train_path, sft_path)
    assert train_path is not None  # validated by DataConfig
    train = load_prompts(train_path, d.prompt_key, d.answer_key)
    source = "heldout-file"
    if eval_path:
        evals = load_prompts(eval_path, d.prompt_key, d.answer_key)
    else:  # DataConfig.validate: eval_split > 0 here, an explicit and labelled split
        n_eval = max(1, int(len(train) * d.eval_split))
        evals, train = train[:n_eval], train[n_eval:]
        source = f"split-from-train ({d.eval_split:.0%}, removed from training)"
        log.warning(
            "evaluating on %d prompts split off the training file (data.eval_split=%s), not a "
            "separate held-out file",
            n_eval,
            d.eval_split,
        )
    if d.eval_limit:
        evals = evals[: d.eval_limit]
    demos = []
    if sft_path and cfg.sft.steps > 0:
        demos = [json.loads(x) for x in Path(sft_path).read_text().splitlines() if x.strip()]
    return RunData(
        tok_dir, train, evals, demos, str(Path(eval_path).resolve()) if eval_path else None, source
    )


def _tokenizer(
    cfg: ReasoningConfig, out_dir: Path, train_path: str | None, sft_path: str | None
) -> str:
    """The model's tokenizer dir, or a tiny one trained here (tool tags as single tokens)."""
    d = cfg.data
    if cfg.model.path is not None:
        return cfg.model.path
    from learner.llm.tokenizer import train_tokenizer

    corpus: list[str] = []
    if d.synthetic == "arithmetic":
        from learner.llm.arithmetic import tokenizer_corpus

        corpus = tokenizer_corpus(d.arithmetic)
    elif d.synthetic == "toolmath":
        from learner.llm.toolmath import toolmath_corpus

        corpus = toolmath_corpus(d.toolmath)
    for path in (train_path, sft_path):
        if path:
            corpus += [
                json.dumps(json.loads(line))
                for line in Path(path).read_text().splitlines()
                if line.strip()
            ]
    from learner.llm.agentic.protocol import tag_tokens

    tags = tag_tokens(cfg.agent.tools) if cfg.agent.enabled else []
    tok = train_tokenizer(corpus, vocab_size=d.tokenizer_vocab, extra_tokens=tags)
    tok_dir = str(out_dir / "tokenizer")
    tok.save_pretrained(tok_dir)
    return tok_dir


def write_curve(rows: list[dict[str, Any]], out_dir: Path) -> dict[str, str]:
    """``curve.csv``: one row per logged step (``step``, ``phase``, ``elapsed_s`` first), for
    spreadsheets and :func:`read_curve`; the plot is the run directory's ``curves.png``
    (``learner.metrics.write_run``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = sorted(
        {k for r in rows for k in r}, key=lambda k: (k not in ("step", "phase", "elapsed_s"), k)
    )
    csv_path = out_dir / "curve.csv"
    with csv_path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    return {"csv": str(csv_path)}


def read_curve(path: Path) -> list[dict[str, Any]]:
    """Rows of a ``curve.csv``; numbers as floats, empty cells dropped."""
    with path.open() as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        row: dict[str, Any] = {}
        for k, v in r.items():
            if v in ("", None):
                continue
            try:
                row[k] = float(v)
            except ValueError:
                row[k] = v
        out.append(row)
    return out
