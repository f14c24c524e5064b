"""Multi-turn tool-using episodes on any rollout backend that can continue from token ids.

Per turn: every live episode's context (prompt + everything so far) is sent to
``backend.generate_ids`` with the tools' closing tags as stop strings; a turn that ends in a
complete call is executed by the tool worker and ``<result>...</result>`` is appended, as
tokens the model did not choose (loss mask 0, log-prob 0); the others are finished. Token ids
are never re-tokenized, so the training batch holds exactly what was sampled.

Rewards: each executed call may carry a per-turn reward (``agent.tool_error_reward`` for a
failed call), placed on the last model token of that turn; the outcome reward of the
episode is scored on the final answer by the reward worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from learner.llm.agentic.config import AgentConfig
from learner.llm.agentic.protocol import (
    ToolCall,
    final_answer,
    format_observation,
    parse_tool_call,
    stop_strings,
)
from learner.llm.rollout.base import RolloutBatch, SamplingParams

__all__ = ["Episode", "run_episodes"]


@dataclass
class Episode:
    prompt: list[int]
    response: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)  # 1: sampled by the model, 0: tool output
    logprobs: list[float] = field(default_factory=list)
    text: str = ""
    turns: int = 0
    calls: int = 0
    errors: int = 0
    turn_rewards: list[tuple[int, float]] = field(default_factory=list)  # (response index, reward)
    finish: str = "stop"

    def add(self, ids: Sequence[int], lps: Sequence[float], text: str, model: bool) -> None:
        self.response += list(ids)
        self.loss_mask += [int(model)] * len(ids)
        self.logprobs += list(lps) if model else [0.0] * len(ids)
        self.text += text


def _turn(
    backend: Any,
    eps: list[Episode],
    live: list[int],
    params: SamplingParams,
    tools: Sequence[str],
    agent: AgentConfig,
    last_turn: bool,
) -> list[tuple[int, ToolCall]]:
    """One model turn for the live episodes; returns the calls to execute.

    One generation call for all of them, as long as the roomiest episode allows; each episode's
    tokens are then cut to its own room. (A shared budget of the *least* room let one episode
    whose tool output nearly filled it cut every other episode's answer short.)"""
    rooms = [agent.max_total_tokens - len(eps[i].response) for i in live]
    p = dataclasses.replace(
        params,
        n=1,
        max_new_tokens=max(1, min(params.max_new_tokens, max(rooms))),
        stop=tuple(params.stop) + stop_strings(tools),
    )
    out = backend.generate_ids([eps[i].prompt + eps[i].response for i in live], p)
    calls = []
    for j, i in enumerate(live):
        ep = eps[i]
        room = max(1, rooms[j])
        ids, lps = out.response_ids[j][:room], out.logprobs[j][:room]
        ep.add(ids, lps, backend.tokenizer.decode(ids, skip_special_tokens=True), True)
        ep.turns += 1
        ep.finish = out.finish_reasons[j] if len(out.response_ids[j]) <= room else "length"
        call = parse_tool_call(ep.text, tools) if ep.finish == "stop" else None
        if call is not None and not last_turn and len(ep.response) < agent.max_total_tokens:
            calls.append((i, call))
    return calls


def run_episodes(
    backend: Any,
    prompt_ids: Sequence[Sequence[int]],
    params: SamplingParams,
    executor: Any,
    agent: AgentConfig,
) -> RolloutBatch:
    """``params.n`` episodes per prompt (contiguous), as one :class:`RolloutBatch`.

    ``extra`` carries per-sample ``loss_mask``, ``turn_rewards``, ``final_texts`` (for the
    outcome verifier), ``turns``, ``tool_calls`` and ``tool_errors``.
    """
    eps = [Episode(list(p)) for p in prompt_ids for _ in range(params.n)]
    index = [i for i in range(len(prompt_ids)) for _ in range(params.n)]
    tools = list(agent.tools)
    live = list(range(len(eps)))
    version = backend.weight_version
    for turn in range(agent.max_turns):
        turn_params = (
            params
            if params.seed is None
            else dataclasses.replace(params, seed=params.seed + 7919 * turn)
        )
        calls = _turn(backend, eps, live, turn_params, tools, agent, turn == agent.max_turns - 1)
        if agent.disable_execution:  # ablation: the attempt is counted, never answered
            for i, _ in calls:
                eps[i].calls += 1
            break
        if not calls:
            break
        observations = executor.execute([c for _, c in calls])
        for (i, _), obs in zip(calls, observations):
            ep = eps[i]
            ep.calls += 1
            if not obs.ok:
                ep.errors += 1
                if agent.tool_error_reward:
                    ep.turn_rewards.append((len(ep.response) - 1, agent.tool_error_reward))
            text = format_observation(obs.text, agent.observation_max_chars)
            ids = list(backend.tokenizer(text, add_special_tokens=False).input_ids)
            ep.add(ids[: max(0, agent.max_total_tokens - len(ep.response))], [], text, False)
        live = [i for i, _ in calls if len(eps[i].response) < agent.max_total_tokens]
        for i, _ in calls:
            if len(eps[i].response) >= agent.max_total_tokens:
                eps[i].finish = "length"
        if not live:
            break
    return RolloutBatch(
        [e.prompt for e in eps],
        [e.response for e in eps],
        [e.logprobs for e in eps],
        [e.text for e in eps],
        [e.finish for e in eps],
        index,
        version,
        {
            "loss_mask": [e.loss_mask for e in eps],
            "turn_rewards": [e.turn_rewards for e in eps],
            "final_texts": [final_answer(e.text) for e in eps],
            "turns": [e.turns for e in eps],
            "tool_calls": [e.calls for e in eps],
            "tool_errors": [e.errors for e in eps],
        },
    )
