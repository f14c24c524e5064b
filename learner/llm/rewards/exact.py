"""Exact-match and format rewards for synthetic tasks (arithmetic) and answer-format shaping.

``exact_match`` compares the *final* number of the response to the reference numerically
after normalisation (``57.0 == 57``, ``1,000 == 1000``), so a response is not rewarded for
mentioning the right number somewhere in the middle; ``exact_string`` is the literal variant.
``format`` rewards responses that end with a well-formed final answer (a boxed expression or
``= <number>``), which is how format rewards are used as a small bonus next to correctness.
"""

from __future__ import annotations

import re

from learner.llm.rewards.extract import extract_boxed, extract_final_number, normalize_number
from learner.llm.rewards.registry import REWARDS

__all__ = ["exact_match_reward", "exact_string_reward", "format_reward"]

_FINAL_EQ = re.compile(r"=\s*-?\d[\d,]*(\.\d+)?\s*$")


@REWARDS.register("exact_match")
def exact_match_reward(response: str, reference: str) -> float:
    """1.0 if the final number of ``response`` equals ``reference`` numerically, else 0.0."""
    ref = normalize_number(reference)
    if ref is None:  # non-numeric reference: compare the final answer string
        got = extract_boxed(response)
        return float((got if got is not None else response).strip() == reference.strip())
    return float(extract_final_number(response) == ref)


@REWARDS.register("exact_string")
def exact_string_reward(response: str, reference: str) -> float:
    """1.0 iff the stripped response equals the stripped reference."""
    return float(response.strip() == reference.strip())


@REWARDS.register("format")
def format_reward(response: str, reference: str = "") -> float:
    """1.0 if the response ends in a final answer (``\\boxed{..}`` present or ``= N`` at the
    end)."""
    text = response.strip()
    if extract_boxed(text) is not None:
        return 1.0
    if _FINAL_EQ.search(text) or re.fullmatch(r"-?\d[\d,]*(\.\d+)?", text):
        return 1.0
    return 0.0
