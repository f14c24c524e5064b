"""Synthetic arithmetic for the offline demo: ``a+b=`` with 1-2 digit operands, held-out pairs.

The demonstrations are deliberately noisy in a *systematic* way: most of them are off by one
(``12+45=58``), a few are random, the rest are right. Supervised fine-tuning imitates the
noise, so the SFT model's greedy answer is usually the off-by-one one (held-out greedy accuracy
starts low), while the right answer keeps a sizeable share of the sampled probability mass.
A verifiable reward (math-verify in the configs) is exactly the signal that removes such a bias;
GRPO raises held-out greedy accuracy far above what imitation of *these* demonstrations gives. The
noise is planted: SFT on clean demonstrations alone reaches ~1.00, so this demo shows recovery
from bad supervision, not RL doing what supervision cannot (see ``learner.llm.toolmath`` for that).
Held-out pairs ``(a, b)`` never appear in SFT or RL prompts, so the gain is generalisation, not
recall.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from learner.llm.datasets import PromptExample, write_jsonl
from rlinf_contracts.config import ConfigError

__all__ = [
    "ArithmeticConfig",
    "arithmetic_split",
    "noisy_demonstrations",
    "format_answer",
    "write_arithmetic_data",
    "tokenizer_corpus",
]


@dataclass
class ArithmeticConfig:
    max_operand: int = field(
        default=99, metadata={"help": "operands are 0..max_operand (99: 1-2 digits)"}
    )
    heldout_frac: float = field(
        default=0.2, metadata={"help": "fraction of (a, b) pairs held out for eval"}
    )
    correct_frac: float = field(
        default=0.3, metadata={"help": "share of demonstrations with the right answer"}
    )
    random_frac: float = field(
        default=0.1, metadata={"help": "share with a random wrong answer; the rest are off by one"}
    )
    seed: int = field(default=0, metadata={"help": "split / noise seed"})
    zero_pad: bool = field(
        default=True,
        metadata={
            "help": (
                "write operands as 2 digits and answers as 3 (07+45=052): fixed digit positions "
                "make addition learnable in minutes on a CPU"
            )
        },
    )

    def validate(self) -> None:
        if not 0.0 < self.heldout_frac < 1.0:
            raise ConfigError(
                f"data.arithmetic.heldout_frac must be in (0, 1), got {self.heldout_frac}"
            )
        if (
            self.correct_frac + self.random_frac > 1.0
            or min(self.correct_frac, self.random_frac) < 0
        ):
            raise ConfigError(
                "data.arithmetic.correct_frac + random_frac must be within [0, 1], got "
                f"{self.correct_frac} + {self.random_frac}"
            )


def _prompt(a: int, b: int, zero_pad: bool) -> str:
    return f"{a:02d}+{b:02d}=" if zero_pad else f"{a}+{b}="


def format_answer(value: int, cfg: ArithmeticConfig) -> str:
    """Demonstration text of an answer (``052`` when zero-padded; exact match reads it as 52)."""
    return f"{value:03d}" if cfg.zero_pad else str(value)


def arithmetic_split(cfg: ArithmeticConfig) -> tuple[list[PromptExample], list[PromptExample]]:
    """All pairs ``(a, b)``, shuffled with ``cfg.seed``, split into (train, held-out)."""
    pairs = [(a, b) for a in range(cfg.max_operand + 1) for b in range(cfg.max_operand + 1)]
    random.Random(cfg.seed).shuffle(pairs)
    n_held = max(1, int(len(pairs) * cfg.heldout_frac))
    ex = [PromptExample(_prompt(a, b, cfg.zero_pad), str(a + b)) for a, b in pairs]
    return ex[n_held:], ex[:n_held]


def noisy_demonstrations(
    examples: list[PromptExample], cfg: ArithmeticConfig
) -> list[dict[str, str]]:
    """One demonstration per example: right with ``correct_frac``, random-wrong with
    ``random_frac``, otherwise off by one (``answer + 1``)."""
    rng = random.Random(cfg.seed + 1)
    top = 2 * cfg.max_operand
    out = []
    for ex in examples:
        right = int(ex.answer)
        u = rng.random()
        if u < cfg.correct_frac:
            ans = right
        elif u < cfg.correct_frac + cfg.random_frac:
            ans = rng.choice([x for x in range(top + 2) if x != right])
        else:
            ans = right + 1
        out.append({"prompt": ex.prompt, "response": format_answer(ans, cfg), "answer": ex.answer})
    return out


def write_arithmetic_data(out_dir: str | Path, cfg: ArithmeticConfig) -> dict[str, Path]:
    """Write ``train.jsonl`` (RL prompts), ``heldout.jsonl`` (eval) and ``demos.jsonl`` (SFT)."""
    d = Path(out_dir)
    train, held = arithmetic_split(cfg)
    return {
        "train": write_jsonl(
            d / "train.jsonl", [{"prompt": e.prompt, "answer": e.answer} for e in train]
        ),
        "heldout": write_jsonl(
            d / "heldout.jsonl", [{"prompt": e.prompt, "answer": e.answer} for e in held]
        ),
        "demos": write_jsonl(d / "demos.jsonl", noisy_demonstrations(train, cfg)),
    }


def tokenizer_corpus(cfg: ArithmeticConfig) -> list[str]:
    """Text the demo tokenizer is trained on: every equation plus a little prose for merges."""
    eqs = [
        _prompt(a, b, cfg.zero_pad) + format_answer(a + b, cfg)
        for a in range(cfg.max_operand + 1)
        for b in range(cfg.max_operand + 1)
    ]
    prose = ["What is the answer? Put the final answer in \\boxed{}.", "The answer is"] * 50
    return eqs + prose
