"""Synthetic task of the agentic demo: easy problems with demonstrations, hard ones without.

- **easy** (demonstrated): ``a+b`` with 2-digit operands (``easy_additions`` of them), every
  ``a*b`` below 100 x 100 with a 1-digit operand (written ``07*83=``), with ``round_products``
  every 2-digit ``a*b`` with a multiple of ten (``47*30=``), and ``wide_products`` products of a
  3-digit and a 1-digit number (``346*07=``). Every demonstration is correct; a random
  ``tool_frac`` of them call the calculator (``<calc>07*08</calc><result>0056</result>0056``), the
  rest answer directly (``0056``). Whether a demonstration uses the tool is independent of the
  problem, so the data teaches the call *format* and copying a result back, but nothing about
  *when* a call is needed.
- **hard** (no demonstrations): ``a*b`` with two 2-digit operands, neither a multiple of ten
  (``47*83=``). A ~0.1M-parameter model cannot multiply these in its head; with the calculator it
  has to copy the expression and then the result. RL prompts are hard train pairs; evaluation is
  on held-out hard pairs that appear nowhere in SFT or RL.

Answers are written with 4 digits (``0056``) and the demo's calculator answers in the same width
(``agent.tool_options.calc.width: 4``), as the arithmetic demo zero-pads (fixed digit positions).
The reward is math-verify, which reads ``0056`` as 56.

Why round and wide products: without them every demonstrated result is below 1000, its leading
digit always 0, and SFT writes that 0 whatever the result says (the right leading digit of a
4-digit result had probability ~1e-4). RL on hard problems then met a right answer to a product
>= 1000 about once in 40 steps, and whether a run ever left the ~0.17 plateau (always calling,
right only below 1000) was a matter of seed. Either family alone was not enough: with only wide
products SFT tied the leading 0 to the look of a 2-digit x 2-digit prompt; with only round ones
it guessed the leading digit from the operands instead of copying it (held-out 0.82-0.96 after
40 RL steps). With both, copying a 4-digit result is in the data, and what RL has to find is
*when* to call: SFT imitates the demonstrations' 30% call rate and mostly answers a hard problem
with a direct guess.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from learner.llm.datasets import PromptExample, write_jsonl
from rlinf_contracts.config import ConfigError

__all__ = [
    "ToolMathConfig",
    "toolmath_split",
    "tool_demonstrations",
    "write_toolmath_data",
    "toolmath_corpus",
]


@dataclass
class ToolMathConfig:
    easy_additions: int = field(
        default=3000, metadata={"help": "how many of the 10,000 2-digit additions are demonstrated"}
    )
    width: int = field(
        default=4,
        metadata={"help": "answer digits (zero-padded); match agent.tool_options.calc.width"},
    )
    tool_frac: float = field(
        default=0.3, metadata={"help": "share of (easy) demonstrations that call the calculator"}
    )
    heldout_frac: float = field(
        default=0.2, metadata={"help": "fraction of hard pairs held out for eval"}
    )
    round_products: bool = field(
        default=True,
        metadata={
            "help": "2-digit products with a multiple of ten are easy (demonstrated, results "
            ">= 1000 to copy) and leave the hard set"
        },
    )
    wide_products: int = field(
        default=3000,
        metadata={"help": "demonstrated 3-digit x 1-digit products (of 8100): 4-digit results"},
    )
    seed: int = field(default=0, metadata={"help": "split / demonstration seed"})

    def validate(self) -> None:
        if not 0 <= self.wide_products <= 8100:
            raise ConfigError(
                f"data.toolmath.wide_products must be in [0, 8100], got {self.wide_products}"
            )
        if not 0.0 <= self.tool_frac <= 1.0 or not 0.0 < self.heldout_frac < 1.0:
            raise ConfigError(
                f"data.toolmath: tool_frac in [0, 1] and heldout_frac in (0, 1), got "
                f"{self.tool_frac}, {self.heldout_frac}"
            )


def _ex(a: int, op: str, b: int) -> PromptExample:
    return PromptExample(f"{a:02d}{op}{b:02d}=", str(a + b if op == "+" else a * b))


def toolmath_split(
    cfg: ToolMathConfig,
) -> tuple[list[PromptExample], list[PromptExample], list[PromptExample]]:
    """(easy, hard train, hard held-out)."""
    rng = random.Random(cfg.seed)
    adds = [_ex(a, "+", b) for a in range(100) for b in range(100)]
    rng.shuffle(adds)
    easy = adds[: cfg.easy_additions] + [
        _ex(a, "*", b) for a in range(100) for b in range(100) if min(a, b) < 10
    ]
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    round_ = lambda a, b: cfg.round_products and (a % 10 == 0 or b % 10 == 0)  # noqa: E731
    easy += [_ex(a, "*", b) for a, b in pairs if round_(a, b)]
    hard = [_ex(a, "*", b) for a, b in pairs if not round_(a, b)]
    wide = [_ex(a, "*", b) for a in range(100, 1000) for b in range(1, 10)]
    easy += random.Random(cfg.seed + 2).sample(wide, cfg.wide_products)
    rng.shuffle(hard)
    n_held = int(len(hard) * cfg.heldout_frac)
    return easy, hard[n_held:], hard[:n_held]


def tool_demonstrations(easy: list[PromptExample], cfg: ToolMathConfig) -> list[dict[str, str]]:
    """One correct demonstration per easy problem; ``tool_frac`` of them through the calculator."""
    rng = random.Random(cfg.seed + 1)
    out = []
    for ex in easy:
        ans = ex.answer.zfill(cfg.width)
        if rng.random() < cfg.tool_frac:
            resp = f"<calc>{ex.prompt[:-1]}</calc><result>{ans}</result>{ans}"
        else:
            resp = ans
        out.append({"prompt": ex.prompt, "response": resp, "answer": ex.answer})
    return out


def write_toolmath_data(out_dir: str | Path, cfg: ToolMathConfig) -> dict[str, Path]:
    """``train.jsonl`` (hard RL prompts), ``heldout.jsonl`` (hard, eval), ``demos.jsonl``
    (easy, SFT)."""
    d = Path(out_dir)
    easy, train, held = toolmath_split(cfg)
    rows = lambda xs: [{"prompt": e.prompt, "answer": e.answer} for e in xs]  # noqa: E731
    return {
        "train": write_jsonl(d / "train.jsonl", rows(train)),
        "heldout": write_jsonl(d / "heldout.jsonl", rows(held)),
        "demos": write_jsonl(d / "demos.jsonl", tool_demonstrations(easy, cfg)),
    }


def toolmath_corpus(cfg: ToolMathConfig) -> list[str]:
    """Tokenizer corpus: every prompt (hard ones too: their text is known, only answers are not)."""
    easy, train, held = toolmath_split(cfg)
    return [e.prompt + e.answer.zfill(cfg.width) for e in easy] + [e.prompt for e in train + held]
