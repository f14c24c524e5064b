"""Agentic (multi-turn, tool-using) rollouts on the reasoning runner: protocol, config, episodes."""

from learner.llm.agentic.config import AgentConfig
from learner.llm.agentic.episodes import Episode, run_episodes
from learner.llm.agentic.protocol import Observation, ToolCall, final_answer, parse_tool_call

__all__ = [
    "AgentConfig",
    "Episode",
    "Observation",
    "ToolCall",
    "final_answer",
    "parse_tool_call",
    "run_episodes",
]
