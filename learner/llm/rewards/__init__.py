"""Reward functions for LLM reasoning RL, registered by name in :data:`REWARDS`.

- ``math``: math-verify equivalence (boxed, LaTeX, numeric), for math datasets.
- ``exact_match``: final number equals the reference (synthetic arithmetic).
- ``exact_string``: literal match.
- ``format``: the response ends in a well-formed final answer.
"""

from learner.llm.rewards import exact as _exact  # noqa: F401  (registers exact_match, format)
from learner.llm.rewards import math as _math  # noqa: F401  (registers math)
from learner.llm.rewards.extract import extract_boxed, extract_final_number, normalize_number
from learner.llm.rewards.registry import REWARDS, RewardFn, combine, score_batch

__all__ = [
    "REWARDS",
    "RewardFn",
    "combine",
    "extract_boxed",
    "extract_final_number",
    "normalize_number",
    "score_batch",
]
