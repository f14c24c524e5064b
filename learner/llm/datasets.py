"""Prompt datasets for reasoning RL: jsonl / parquet rows of a prompt and a reference answer.

A row is ``{"prompt": ..., "answer": ...}`` (keys configurable). Prompts are used raw or passed
through the tokenizer's chat template (``prompt_format: chat``), so the same file serves a
tiny model trained from scratch and an instruction-tuned model.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["PromptExample", "load_prompts", "apply_template", "PromptSampler", "write_jsonl"]


@dataclass(frozen=True)
class PromptExample:
    prompt: str
    answer: str


def _rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        rows = []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n} is not valid JSON: {e}") from None
        return rows
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raise ValueError(f"dataset {path} must end in .jsonl or .parquet")


def load_prompts(
    path: str | Path,
    prompt_key: str = "prompt",
    answer_key: str = "answer",
    limit: int | None = None,
) -> list[PromptExample]:
    """Read ``path`` (jsonl / parquet) into examples; a missing key names the row and the keys
    seen."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"dataset file {p} not found (data.train_path / data.eval_path)")
    out = []
    for i, row in enumerate(_rows(p)):
        if prompt_key not in row or answer_key not in row:
            raise KeyError(
                f"{p} row {i} lacks '{prompt_key}' or '{answer_key}' (has {sorted(row)}); "
                "set data.prompt_key / data.answer_key"
            )
        out.append(PromptExample(str(row[prompt_key]), str(row[answer_key])))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ValueError(f"dataset {p} is empty")
    return out


def write_jsonl(path: str | Path, rows: Sequence[dict[str, Any]]) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def apply_template(
    tokenizer: Any, prompt: str, fmt: Literal["raw", "chat"] = "raw", system: str | None = None
) -> str:
    """The text the model sees: ``prompt`` as is, or wrapped by the tokenizer's chat template."""
    if fmt == "raw":
        return prompt
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": prompt}
    ]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


class PromptSampler:
    """Endless epoch-shuffled batches of examples (a fresh permutation every epoch)."""

    def __init__(self, examples: Sequence[PromptExample], seed: int = 0) -> None:
        if not examples:
            raise ValueError("PromptSampler needs at least one example")
        self.examples = list(examples)
        self.rng = random.Random(seed)
        self._order: list[int] = []

    def next_batch(self, n: int) -> list[PromptExample]:
        out = []
        while len(out) < n:
            if not self._order:
                self._order = list(range(len(self.examples)))
                self.rng.shuffle(self._order)
            out.append(self.examples[self._order.pop()])
        return out
