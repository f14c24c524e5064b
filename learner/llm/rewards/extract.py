"""Pull the final answer out of a model response: ``\\boxed{...}``, ``= 57``, ``The answer is 57``.

Why a hand-written scanner for ``\\boxed``: regular expressions cannot match the nested braces
of ``\\boxed{\\frac{1}{2}}``, and answers such as ``\\boxed{\\{1, 2\\}}`` need escaped braces kept.
The last answer in the text wins, because chain-of-thought responses often box or state
intermediate results before the final one.

>>> extract_boxed(r"so \\boxed{3} then \\boxed{\\frac{1}{2}}")
'\\\\frac{1}{2}'
>>> extract_final_number("12+45=57")
'57'
>>> extract_final_number("no digits here") is None
True
"""

from __future__ import annotations

import re

__all__ = ["extract_boxed", "extract_final_number", "normalize_number"]

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def _scan_braced(text: str, open_idx: int) -> str | None:
    """Content between ``text[open_idx] == '{'`` and its matching ``}``; None if unbalanced."""
    depth = 0
    i = open_idx
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
            i += 2  # escaped brace: part of the content, not structure
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[open_idx + 1 : i]
        i += 1
    return None


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (or ``\\boxed 5``); None if absent."""
    best: tuple[int, str] | None = None
    for cmd in _BOX_COMMANDS:
        start = text.rfind(cmd)
        while start != -1:
            j = start + len(cmd)
            while j < len(text) and text[j] == " ":
                j += 1
            content: str | None = None
            if j < len(text) and text[j] == "{":
                content = _scan_braced(text, j)
            elif j > start + len(cmd) and j < len(text):  # "\boxed 5": one token after a space
                m = re.match(r"[^\s$]+", text[j:])
                content = m.group(0) if m else None
            if content is not None:
                if best is None or start > best[0]:
                    best = (start, content.strip())
                break
            start = text.rfind(cmd, 0, start)
    return None if best is None else best[1]


def normalize_number(token: str) -> str | None:
    """Canonical text of a number token: ``'1,000'`` -> ``'1000'``, ``'57.0'`` -> ``'57'``.

    Thousands separators are only accepted in groups of three, so ``'1,2'`` (a list, or a
    European decimal) is not silently read as 12.
    """
    t = token.strip().replace(" ", "")
    if "," in t:
        if not re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", t):
            return None
        t = t.replace(",", "")
    if not re.fullmatch(r"-?(\d+(\.\d*)?|\.\d+)", t):
        return None
    neg = t.startswith("-")
    body = t.lstrip("-")
    if "." in body:
        body = body.rstrip("0").rstrip(".")
    body = body.lstrip("0") or "0"
    if body.startswith("."):
        body = "0" + body
    return ("-" + body) if neg and body != "0" else body


def extract_final_number(text: str) -> str | None:
    """Last number in ``text`` (after a boxed answer takes priority), normalised; None if none."""
    boxed = extract_boxed(text)
    source = boxed if boxed is not None else text
    matches = _NUMBER.findall(source)
    for token in reversed(matches):
        token = token.rstrip(",")
        norm = normalize_number(token)
        if norm is None and "," in token:  # "1,2" is a list: its last element is the answer
            norm = normalize_number(token.rsplit(",", 1)[1])
        if norm is not None:
            return norm
    return None
