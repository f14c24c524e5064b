"""``AgentConfig``: the ``agent:`` section of a reasoning config (multi-turn tool use).

Empty ``tools`` is the single-turn runner as before. With tools, each rollout sample is an
episode of up to ``max_turns`` model turns separated by tool observations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlinf_contracts.config import ConfigError

__all__ = ["AgentConfig"]


@dataclass
class AgentConfig:
    tools: list[str] = field(
        default_factory=list,
        metadata={
            "help": (
                "enabled tools by tag (learner.llm.tools.TOOLS: calc, python, search); empty = "
                "single-turn"
            )
        },
    )
    max_turns: int = field(
        default=3, metadata={"help": "model turns per episode (tool calls <= max_turns - 1)"}
    )
    max_total_tokens: int = field(
        default=64,
        metadata={"help": "response budget of a whole episode: model + observation tokens"},
    )
    tool_timeout_s: float = field(
        default=5.0,
        metadata={"help": "wall-clock limit of one tool call (error observation past it)"},
    )
    observation_max_chars: int = field(
        default=400, metadata={"help": "longer tool outputs are cut"}
    )
    tool_error_reward: float = field(
        default=0.0, metadata={"help": "per-turn reward of a call that failed (e.g. -0.1)"}
    )
    tool_options: dict[str, dict[str, Any]] = field(
        default_factory=dict,
        metadata={"help": "tool tag -> constructor kwargs (e.g. search: {corpus_path: ...})"},
    )
    disable_execution: bool = field(
        default=False,
        metadata={
            "help": (
                "ablation: a call ends the episode unanswered (SFT + RL without tools); attempts "
                "still count as tool calls"
            )
        },
    )

    def validate(self) -> None:
        from learner.llm.tools import TOOLS

        for name in self.tools:
            if name not in TOOLS:
                raise ConfigError(f"agent.tools names {name!r}; registered tools: {TOOLS.names()}")
        for name in self.tool_options:
            if name not in self.tools:
                raise ConfigError(
                    f"agent.tool_options.{name} is set but {name!r} is not in agent.tools "
                    f"{self.tools}"
                )
        if self.max_turns < 1:
            raise ConfigError(f"agent.max_turns must be >= 1, got {self.max_turns}")
        if self.max_total_tokens < 1 or self.tool_timeout_s <= 0:
            raise ConfigError("agent.max_total_tokens and agent.tool_timeout_s must be > 0")

    @property
    def enabled(self) -> bool:
        return bool(self.tools)
