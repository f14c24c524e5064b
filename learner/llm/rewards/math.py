"""Math answers checked with math-verify: boxed / LaTeX / numeric equivalence via sympy.

Why math-verify rather than string matching: ``\\frac{1}{2}``, ``0.5`` and ``\\dfrac12`` are
the same answer, ``x = 3`` answers ``3``, and sets / intervals need symbolic comparison.
math-verify enforces its timeouts with ``signal.alarm``, which only works on the main thread;
off the main thread (a threaded Ray actor, a thread pool) the timeouts are disabled instead of
crashing the scorer.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from learner.llm.rewards.extract import extract_final_number, normalize_number
from learner.llm.rewards.registry import REWARDS

__all__ = ["math_verify_reward", "math_verify_available"]

log = logging.getLogger(__name__)

try:  # optional dependency (llm extra): ``pip install math-verify``
    from math_verify import parse as _mv_parse
    from math_verify import verify as _mv_verify
except ImportError:  # pragma: no cover - exercised only without the llm extra
    _mv_parse = None
    _mv_verify = None


def math_verify_available() -> bool:
    return _mv_parse is not None


def _timeouts() -> dict[str, Any]:
    on_main = threading.current_thread() is threading.main_thread()
    return {"parse": 5 if on_main else None, "verify": 5 if on_main else None}


def _as_gold(reference: str) -> str:
    """Wrap a bare reference in ``$...$`` so LaTeX such as ``\\frac{1}{2}`` parses as math."""
    ref = reference.strip()
    if "$" in ref or "\\boxed" in ref or "\\(" in ref or "\\[" in ref:
        return ref
    return f"${ref}$"


@REWARDS.register("math")
def math_verify_reward(response: str, reference: str) -> float:
    """1.0 if math-verify judges the response's final answer equal to ``reference``.

    Falls back to numeric exact match (with a one-time warning) when math-verify is not
    installed, so CPU-only installs without the llm extra still score numeric tasks.
    """
    if _mv_parse is None or _mv_verify is None:
        if not getattr(math_verify_reward, "_warned", False):
            log.warning("math-verify not installed (pip install math-verify); using numeric match")
            math_verify_reward._warned = True  # type: ignore[attr-defined]  # warn-once flag
        ref = normalize_number(reference)
        return float(ref is not None and extract_final_number(response) == ref)
    t = _timeouts()
    try:
        gold = _mv_parse(_as_gold(reference), parsing_timeout=t["parse"])
        pred = _mv_parse(response, parsing_timeout=t["parse"])
        if not gold or not pred:
            return 0.0
        return float(_mv_verify(gold, pred, timeout_seconds=t["verify"]))
    except Exception as e:  # math-verify raises on pathological input; a bad answer scores 0
        log.debug("math-verify failed on %r vs %r: %s", response[:80], reference, e)
        return 0.0
