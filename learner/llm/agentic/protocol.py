"""The multi-turn tool protocol: tagged calls, appended observations, the final answer.

Search-R1 style, one grammar for every backend and tool: the model writes
``<name>ARGS</name>`` (``<calc>47*83</calc>``, ``<python>print(2**10)</python>``,
``<search>capital of France</search>``) and stops at the closing tag; the tool worker runs the
call and the runner appends ``<result>OUTPUT</result>``, whose tokens are *not* the model's
(loss mask 0); generation continues after it. The episode's answer is the text the model
writes after its last observation.

>>> parse_tool_call("so <calc>47*83</calc>", ["calc", "python"])
ToolCall(name='calc', args='47*83')
>>> parse_tool_call("the answer is 3901", ["calc"]) is None
True
>>> format_observation("3901")
'<result>3901</result>'
>>> final_answer("<calc>47*83</calc><result>3901</result>3901")
'3901'
>>> split_segments("<calc>1+2</calc><result>3</result>3")
[('<calc>1+2</calc>', True), ('<result>3</result>', False), ('3', True)]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ToolCall",
    "Observation",
    "OBS_OPEN",
    "OBS_CLOSE",
    "stop_strings",
    "tag_tokens",
    "parse_tool_call",
    "format_observation",
    "final_answer",
    "split_segments",
]

OBS_OPEN, OBS_CLOSE = "<result>", "</result>"
_OBS = re.compile(re.escape(OBS_OPEN) + r".*?" + re.escape(OBS_CLOSE), re.S)


@dataclass(frozen=True)
class ToolCall:
    name: str  # the tag, e.g. "calc"
    args: str  # the text between the tags


@dataclass(frozen=True)
class Observation:
    text: str  # what goes between <result> and </result>
    ok: bool = True  # False: the tool failed, timed out or was unknown (text says why)
    seconds: float = 0.0


def stop_strings(tools: Sequence[str]) -> tuple[str, ...]:
    """Generation of a turn stops at the closing tag of any enabled tool."""
    return tuple(f"</{t}>" for t in tools)


def tag_tokens(tools: Sequence[str]) -> list[str]:
    """Tags a locally trained tokenizer keeps as single tokens (opening, closing, observation)."""
    return [x for t in tools for x in (f"<{t}>", f"</{t}>")] + [OBS_OPEN, OBS_CLOSE]


def parse_tool_call(text: str, tools: Sequence[str]) -> ToolCall | None:
    """The call that ends ``text`` (one turn's generation), or None when the turn ends otherwise."""
    stripped = text.rstrip()
    for t in tools:
        close = f"</{t}>"
        if stripped.endswith(close):
            start = stripped.rfind(f"<{t}>")
            if start == -1:
                return None  # a closing tag without its opening one is no call
            return ToolCall(t, stripped[start + len(t) + 2 : len(stripped) - len(close)].strip())
    return None


def format_observation(text: str, max_chars: int = 2000) -> str:
    """The observation as appended to the context; long outputs are cut (and say so)."""
    if len(text) > max_chars:
        text = text[:max_chars] + "...[truncated]"
    return f"{OBS_OPEN}{text}{OBS_CLOSE}"


def final_answer(text: str) -> str:
    """The model's text after its last observation (the whole text if no tool was used)."""
    end = text.rfind(OBS_CLOSE)
    return (text[end + len(OBS_CLOSE) :] if end != -1 else text).strip()


def split_segments(text: str) -> list[tuple[str, bool]]:
    """``(segment, is_model_text)`` pieces of a demonstration: observations are not the model's."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in _OBS.finditer(text):
        if m.start() > pos:
            out.append((text[pos : m.start()], True))
        out.append((m.group(0), False))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], True))
    return out
