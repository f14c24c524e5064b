"""Reward functions on tricky answers: nested boxes, LaTeX vs decimals, thousands separators."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from learner.llm.rewards import REWARDS, combine, extract_boxed, extract_final_number, score_batch
from rlinf_contracts.registry import UnknownNameError

MATH_SAMPLE = Path(__file__).resolve().parents[3] / "learner/llm/data/math_sample.jsonl"


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"\boxed{42}", "42"),
        (r"first \boxed{1} then \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\sqrt{\frac{a}{b}}}", r"\sqrt{\frac{a}{b}}"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"\fbox{7}", "7"),
        (r"answer: \boxed 5$", "5"),
        (r"\boxed{unclosed", None),
        ("no box", None),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("12+45=57", "57"),
        ("= 057", "57"),
        ("the total is 1,000 apples", "1000"),
        ("values 1,2", "2"),  # a list, not twelve
        ("57.0", "57"),
        ("-0.50", "-0.5"),
        ("-0", "0"),
        (r"\boxed{13} and later 99", "13"),  # a boxed answer wins over later numbers
        ("nothing", None),
    ],
)
def test_extract_final_number(text, expected):
    assert extract_final_number(text) == expected


@pytest.mark.parametrize(
    "response, reference, score",
    [
        ("12+45=57", "57", 1.0),
        ("12+45=157", "57", 0.0),  # must not match the suffix
        ("12+45=5", "57", 0.0),  # nor a prefix
        ("57 is wrong, the answer is 58", "58", 1.0),
        ("the answer is 57, no wait 58", "57", 0.0),  # final answer counts
        ("= 57.00", "57", 1.0),
        ("= 1,000", "1000", 1.0),
        ("", "0", 0.0),
        (r"\boxed{yes}", "yes", 1.0),
    ],
)
def test_exact_match(response, reference, score):
    assert REWARDS.get("exact_match")(response, reference) == score


@pytest.mark.parametrize(
    "response, reference, score",
    [
        (r"so the answer is $\boxed{\frac{1}{2}}$", r"\frac{1}{2}", 1.0),
        (r"$\boxed{0.5}$", r"\frac{1}{2}", 1.0),
        (r"$\boxed{\dfrac{3}{4}}$", "0.75", 1.0),
        (r"$\boxed{5\sqrt{2}}$", r"\sqrt{50}", 1.0),
        (r"$\boxed{7\sqrt{2}}$", r"5\sqrt{2}", 0.0),
        (r"We get $x = 4$.", "4", 1.0),
        (r"$\boxed{1,000,000}$", "1000000", 1.0),
        (r"$\boxed{-8}$", "-8", 1.0),
        (r"$\boxed{8}$", "-8", 0.0),
        (r"$\boxed{9\pi}$", r"9\pi", 1.0),
        (r"$\boxed{28.27}$", r"9\pi", 0.0),
        ("I don't know", "42", 0.0),
        (r"first $\boxed{3}$, final $\boxed{6}$", "6", 1.0),
    ],
)
def test_math_verify(response, reference, score):
    assert REWARDS.get("math")(response, reference) == score


def test_math_verify_off_main_thread():
    """math-verify's signal-based timeouts must not crash scorers running in threads."""
    out = []
    t = threading.Thread(target=lambda: out.append(REWARDS.get("math")(r"$\boxed{0.5}$", "1/2")))
    t.start()
    t.join(30)
    assert out == [1.0]


@pytest.mark.parametrize(
    "response, score",
    [
        (r"thinking... \boxed{3}", 1.0),
        ("3+4=7", 1.0),
        ("7", 1.0),
        ("3+4=", 0.0),
        ("the answer is seven", 0.0),
    ],
)
def test_format_reward(response, score):
    assert REWARDS.get("format")(response, "") == score


def test_score_batch_and_combine():
    responses = ["1+1=2", "1+1=3", "nope"]
    refs = ["2", "2", "2"]
    assert score_batch("exact_match", responses, refs) == [1.0, 0.0, 0.0]
    assert combine({"exact_match": 1.0, "format": 0.1}, responses, refs) == pytest.approx(
        [1.1, 0.1, 0.0]
    )
    with pytest.raises(ValueError, match="one reference per response"):
        score_batch("exact_match", responses, refs[:1])
    with pytest.raises(UnknownNameError, match="exact_match"):
        REWARDS.get("exact_mach")


def test_math_sample_is_self_consistent():
    """Every boxed reference of the shipped sample scores 1 against itself, and 0 against 0."""
    rows = [json.loads(line) for line in MATH_SAMPLE.read_text().splitlines()]
    assert len(rows) >= 30
    fn = REWARDS.get("math")
    for row in rows:
        assert fn(f"$\\boxed{{{row['answer']}}}$", row["answer"]) == 1.0, row
    wrong = sum(fn(r"$\boxed{123456789}$", row["answer"]) for row in rows)
    assert wrong == 0
