"""Multi-turn tool episodes: protocol, masks of tool tokens, per-turn rewards, engine mappings."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from learner.llm.agentic import AgentConfig, run_episodes
from learner.llm.agentic.protocol import (
    Observation,
    ToolCall,
    final_answer,
    format_observation,
    parse_tool_call,
    tag_tokens,
)
from learner.llm.agentic.training import encode_demo, episode_scores, turn_reward_tensor
from learner.llm.batch import make_train_batch
from learner.llm.rollout import RolloutBatch, SamplingParams


@pytest.fixture(scope="module")
def tag_tok():
    from learner.llm.arithmetic import ArithmeticConfig, tokenizer_corpus
    from learner.llm.tokenizer import train_tokenizer

    return train_tokenizer(
        tokenizer_corpus(ArithmeticConfig(max_operand=20)), extra_tokens=tag_tokens(["calc"])
    )


class ScriptedBackend:
    """Answers turn k of every episode with ``script[k]`` (text), recording the contexts it saw."""

    def __init__(self, tok: Any, script: list[str]) -> None:
        self.tokenizer, self.script, self.seen, self.weight_version = tok, script, [], 3

    def generate_ids(self, prompt_ids, params):
        turn = len(self.seen)
        self.seen.append([list(p) for p in prompt_ids])
        assert params.n == 1 and "</calc>" in params.stop
        ids = [
            self.tokenizer(self.script[turn], add_special_tokens=False).input_ids
            for _ in prompt_ids
        ]
        return RolloutBatch(
            [list(p) for p in prompt_ids],
            ids,
            [[-0.5] * len(r) for r in ids],
            [self.script[turn]] * len(ids),
            ["stop"] * len(ids),
            list(range(len(ids))),
            self.weight_version,
        )


class Calc:
    def __init__(self, fail: bool = False) -> None:
        self.calls, self.fail = [], fail

    def execute(self, calls):
        self.calls += calls
        return [Observation("error: boom", False) if self.fail else Observation("5") for _ in calls]


def test_tool_tokens_are_exactly_the_masked_ones(tag_tok):
    backend = ScriptedBackend(tag_tok, ["<calc>2+3</calc>", "5"])
    prompt = tag_tok("02+03=", add_special_tokens=False).input_ids
    out = run_episodes(
        backend,
        [prompt],
        SamplingParams(n=2, max_new_tokens=8),
        Calc(),
        AgentConfig(tools=["calc"], max_turns=3, max_total_tokens=40),
    )
    enc = lambda s: tag_tok(s, add_special_tokens=False).input_ids  # noqa: E731
    t1, obs, t2 = enc("<calc>2+3</calc>"), enc(format_observation("5")), enc("5")
    assert out.response_ids[0] == t1 + obs + t2
    assert out.extra["loss_mask"][0] == [1] * len(t1) + [0] * len(obs) + [1] * len(t2)
    assert out.logprobs[0] == [-0.5] * len(t1) + [0.0] * len(obs) + [-0.5] * len(t2)
    assert backend.seen[1][0] == prompt + t1 + obs  # turn 2 continues from ids, never re-tokenized
    assert (
        out.extra["final_texts"] == ["5", "5"]
        and out.extra["turns"] == [2, 2]
        and out.extra["tool_calls"] == [1, 1]
    )
    assert out.prompt_index == [0, 0] and out.weight_version == 3
    # the training batch: tool tokens are read (attention) but carry no loss
    tb = make_train_batch(
        out.prompt_ids, out.response_ids, tag_tok.pad_token_id, out.extra["loss_mask"]
    )
    assert tb.attention_mask[0, tb.prompt_len :].tolist() == [1] * len(out.response_ids[0])
    assert tb.response_mask[0].tolist() == [float(m) for m in out.extra["loss_mask"][0]]


def test_turn_limit_failed_call_reward_and_ablation(tag_tok):
    agent = AgentConfig(tools=["calc"], max_turns=2, max_total_tokens=40, tool_error_reward=-0.25)
    backend = ScriptedBackend(tag_tok, ["<calc>2+3</calc>", "<calc>1+1</calc>"])
    calc = Calc(fail=True)
    out = run_episodes(backend, [[5, 6]], SamplingParams(n=1), calc, agent)
    assert len(calc.calls) == 1  # the call in the last allowed turn is not executed
    ((t, r),) = out.extra["turn_rewards"][0]
    assert r == -0.25 and out.extra["loss_mask"][0][t] == 1  # on the call's last model token
    assert out.extra["tool_errors"] == [1] and episode_scores([1.0], out.extra["turn_rewards"]) == [
        0.75
    ]
    dense = turn_reward_tensor(out.extra["turn_rewards"], 30)
    assert dense[0, t] == -0.25 and float(dense.sum()) == -0.25
    calc2 = Calc()
    off = run_episodes(
        ScriptedBackend(tag_tok, ["<calc>2+3</calc>"]),
        [[5, 6]],
        SamplingParams(n=1),
        calc2,
        AgentConfig(tools=["calc"], disable_execution=True),
    )
    assert (
        calc2.calls == []
        and off.extra["final_texts"] == ["<calc>2+3</calc>"]
        and off.extra["turns"] == [1]
    )
    assert off.extra["tool_calls"] == [
        1
    ]  # the attempt is counted (tool-call rate of the no-tool ablation)


def test_demonstrations_mask_tool_output_like_rollouts(tag_tok):
    ids, mask = encode_demo(tag_tok, "<calc>2+3</calc><result>5</result>5", tag_tok.eos_token_id)
    obs = tag_tok("<result>5</result>", add_special_tokens=False).input_ids
    assert len(ids) == len(mask) and ids[-1] == tag_tok.eos_token_id
    assert [i for i, m in zip(ids, mask) if m == 0] == obs
    plain, pmask = encode_demo(tag_tok, "057", tag_tok.eos_token_id)
    assert plain == tag_tok("057", add_special_tokens=False).input_ids + [
        tag_tok.eos_token_id
    ] and set(pmask) == {1}


def test_tags_are_single_tokens_and_decode_back(tag_tok):
    for tag in tag_tokens(["calc"]):
        assert len(tag_tok(tag, add_special_tokens=False).input_ids) == 1
    text = "<calc>12+3</calc><result>15</result>15"
    assert (
        tag_tok.decode(tag_tok(text, add_special_tokens=False).input_ids, skip_special_tokens=True)
        == text
    )
    assert final_answer(text) == "15"


def test_hf_backend_stops_at_a_closing_tag(tag_tok, monkeypatch):
    from types import SimpleNamespace

    from learner.llm.rollout.hf import HFRolloutBackend

    close = tag_tok.convert_tokens_to_ids("</calc>")

    class AlwaysClose(torch.nn.Module):  # a "model" whose next token is always </calc>
        def forward(self, input_ids, past_key_values=None, **_: Any):
            logits = torch.zeros(*input_ids.shape, len(tag_tok))
            logits[..., close] = 10.0
            return SimpleNamespace(logits=logits, past_key_values=past_key_values)

    model = AlwaysClose()
    b = HFRolloutBackend(model, tag_tok)
    out = b.generate_ids(
        [[5, 6, 7]], SamplingParams(n=2, temperature=0.0, max_new_tokens=6, stop=("</calc>",))
    )
    assert out.response_ids == [[close], [close]] and out.finish_reasons == ["stop", "stop"]
    # a multi-token stop string is matched on text: the row ends at the token completing it
    from learner.llm.rollout.hf import _first_text_stop

    ids = tag_tok("12+3=15", add_special_tokens=False).input_ids
    assert _first_text_stop(ids, None, ("+3",), tag_tok) == 4  # 1 2 + 3


def test_engine_adapters_map_the_multi_turn_stop():
    from learner.llm.rollout.sglang_backend import SGLangRolloutBackend, sglang_sampling_params
    from learner.llm.rollout.vllm_backend import VLLMRolloutBackend, vllm_sampling_kwargs

    p = SamplingParams(n=1, stop=("</calc>", "</python>"))
    kw = vllm_sampling_kwargs(p)
    assert kw["stop"] == ["</calc>", "</python>"] and kw["include_stop_str_in_output"] is True
    sp = sglang_sampling_params(p)
    assert sp["stop"] == ["</calc>", "</python>"] and sp["no_stop_trim"] is True
    assert "stop" not in vllm_sampling_kwargs(SamplingParams())
    for cls in (VLLMRolloutBackend, SGLangRolloutBackend):  # both continue episodes from token ids
        assert "generate_ids" in cls.__dict__


def test_dense_turn_rewards_reach_token_level_advantages():
    from learner.llm.algo import LLMAlgorithmConfig, token_advantages, token_rewards
    from rlinf_contracts.config import from_dict

    algo = from_dict(LLMAlgorithmConfig, {"adv": "reinforce_pp", "gamma": 1.0})
    mask = torch.tensor(
        [[1.0, 1.0, 0.0, 0.0, 1.0]]
    )  # two model tokens, two tool tokens, one model token
    dense = torch.tensor([[0.0, -0.5, 0.0, 0.0, 0.0]])
    r = token_rewards(algo, torch.tensor([1.0]), mask, dense=dense)
    assert r.tolist() == [[0.0, -0.5, 0.0, 0.0, 1.0]]
    adv = token_advantages(
        algo, torch.tensor([1.0, 0.0]), torch.cat([mask, mask]), 2, dense=torch.cat([dense, dense])
    )
    assert (
        adv.shape == (2, 5) and float(adv[:, 2:4].abs().sum()) == 0.0
    )  # tool tokens get no advantage


def test_agent_config_names_bad_keys():
    from rlinf_contracts.config import ConfigError, from_dict

    with pytest.raises(ConfigError, match="agent.tools names 'calculator'"):
        from_dict(AgentConfig, {"tools": ["calculator"]})
    with pytest.raises(ConfigError, match="agent.tool_options.search"):
        from_dict(AgentConfig, {"tools": ["calc"], "tool_options": {"search": {}}})
    # the same keys, well formed, are accepted, and the config's tools are what calls parse against
    agent = from_dict(AgentConfig, {"tools": ["calc"], "tool_options": {"calc": {}}})
    assert agent.enabled and agent.tools == ["calc"] and agent.tool_options == {"calc": {}}
    assert parse_tool_call("so <calc> 1 </calc>\n", agent.tools) == ToolCall("calc", "1")
    assert parse_tool_call("so <python>1</python>", agent.tools) is None  # not an enabled tool
    assert (
        parse_tool_call("so 1</calc>", agent.tools) is None
    )  # a closing tag without its opening one


def test_one_episode_near_its_budget_does_not_cut_the_others(tag_tok):
    """Each episode's turn is cut to its own room, not to the least room of the batch."""

    class Bounded(ScriptedBackend):  # honours max_new_tokens like a real engine
        def generate_ids(self, prompt_ids, params):
            out = super().generate_ids(prompt_ids, params)
            out.response_ids = [r[: params.max_new_tokens] for r in out.response_ids]
            out.logprobs = [lp[: params.max_new_tokens] for lp in out.logprobs]
            return out

    class TwoResults:
        def execute(self, calls):  # a long result for the first episode, a short one after
            return [Observation("1" * 12 if k == 0 else "5") for k in range(len(calls))]

    enc = lambda s: tag_tok(s, add_special_tokens=False).input_ids  # noqa: E731
    t1, answer = enc("<calc>2+3</calc>"), enc("12345")
    long_obs = enc(format_observation("1" * 12))
    budget = len(t1) + len(long_obs) + 2  # room for 2 answer tokens in the first episode
    out = run_episodes(
        Bounded(tag_tok, ["<calc>2+3</calc>", "12345"]),
        [enc("02+03="), enc("01+04=")],
        SamplingParams(n=1, max_new_tokens=8),
        TwoResults(),
        AgentConfig(tools=["calc"], max_turns=2, max_total_tokens=budget),
    )
    assert len(out.response_ids[0]) == budget and out.finish_reasons[0] == "length"
    assert out.extra["final_texts"][1] == "12345"  # the other episode answers in full
    assert out.response_ids[1][-len(answer) :] == answer
