"""Pure parts of the vLLM / SGLang adapters: sampling params, batching, outputs, weight path."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from learner.llm.rollout import ROLLOUT_BACKENDS, SamplingParams
from learner.llm.rollout.engine_common import (
    EngineSpec,
    engine_param_name,
    finish_reason,
    request_batches,
    weight_chunks,
)
from learner.llm.rollout.sglang_backend import sglang_outputs_to_lists, sglang_sampling_params
from learner.llm.rollout.vllm_backend import vllm_outputs_to_lists, vllm_sampling_kwargs


def test_registered():
    assert {"hf", "vllm", "sglang"} <= set(ROLLOUT_BACKENDS.names())


def test_vllm_sampling_mapping():
    kw = vllm_sampling_kwargs(
        SamplingParams(
            n=8,
            temperature=0.6,
            top_p=0.95,
            top_k=20,
            max_new_tokens=1024,
            stop_token_ids=(7,),
            seed=3,
        )
    )
    assert kw == {
        "n": 8,
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 20,
        "max_tokens": 1024,
        "logprobs": 0,
        "seed": 3,
        "skip_special_tokens": True,
        "stop_token_ids": [7],
    }
    assert vllm_sampling_kwargs(SamplingParams())["top_k"] == -1


def test_sglang_sampling_mapping():
    sp = sglang_sampling_params(SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=9))
    assert sp == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "max_new_tokens": 16,
        "skip_special_tokens": True,
        "sampling_seed": 9,
    }
    assert "n" not in sp  # samples are expanded into separate requests instead


def test_request_batches_keep_groups_whole():
    prompts = [[1], [2, 2], [3]]
    assert request_batches(prompts, n=4) == [[(0, [1]), (1, [2, 2]), (2, [3])]]
    b = request_batches(prompts, n=2, max_requests=4, expand_samples=True)
    assert b == [[(0, [1]), (0, [1]), (1, [2, 2]), (1, [2, 2])], [(2, [3]), (2, [3])]]
    assert request_batches(prompts, n=2, max_requests=2) == [[(0, [1]), (1, [2, 2])], [(2, [3])]]
    with pytest.raises(ValueError, match="smaller than one group"):
        request_batches(prompts, n=4, max_requests=3, expand_samples=True)


def test_weight_names_and_chunks():
    state = {
        "module.model.embed_tokens.weight": torch.zeros(10, 4),  # 160 B
        "base_model.model.model.layers.0.q_proj.base_layer.weight": torch.zeros(4, 4),  # 64 B
        "base_model.model.model.layers.0.q_proj.lora_A.default.weight": torch.zeros(2, 4),
        "lm_head.weight": torch.zeros(10, 4),
    }
    chunks = weight_chunks(state, max_bytes=200)
    names = [[n for n, _ in c] for c in chunks]
    assert names == [
        ["model.embed_tokens.weight"],
        ["model.layers.0.q_proj.weight"],
        ["lm_head.weight"],
    ]
    assert len(weight_chunks(state, max_bytes=1 << 20)) == 1
    assert engine_param_name("_orig_mod.module.x") == "x"
    with pytest.raises(ValueError):
        weight_chunks(state, 0)


def test_vllm_output_parsing():
    lp = lambda v: SimpleNamespace(logprob=v)  # noqa: E731
    comp = lambda toks, lps, reason: SimpleNamespace(  # noqa: E731
        token_ids=toks,
        logprobs=[{t: lp(v)} for t, v in zip(toks, lps)],
        text="x",
        finish_reason=reason,
    )
    outs = [
        SimpleNamespace(
            prompt_token_ids=[5, 6],
            outputs=[comp([1, 2], [-0.1, -0.2], "stop"), comp([3], [-0.3], "length")],
        )
    ]
    p, r, logps, t, why = vllm_outputs_to_lists(outs)
    assert p == [[5, 6], [5, 6]] and r == [[1, 2], [3]] and logps == [[-0.1, -0.2], [-0.3]]
    assert why == ["stop", "length"]
    missing = [
        SimpleNamespace(
            prompt_token_ids=[1],
            outputs=[SimpleNamespace(token_ids=[4], logprobs=None, text="", finish_reason="stop")],
        )
    ]
    assert (
        vllm_outputs_to_lists(missing)[2][0][0] != vllm_outputs_to_lists(missing)[2][0][0]
    )  # NaN, not 0


def test_sglang_output_parsing():
    outs = [
        {
            "text": "42",
            "meta_info": {
                "output_token_logprobs": [(-0.5, 11, None), (-0.1, 2, None)],
                "finish_reason": {"type": "stop", "matched": 2},
            },
        },
        {
            "text": "4",
            "meta_info": {
                "output_token_logprobs": [(-1.0, 12, None)],
                "finish_reason": {"type": "length", "length": 1},
            },
        },
    ]
    ids, lps, texts, why = sglang_outputs_to_lists(outs)
    assert ids == [[11, 2], [12]] and lps == [[-0.5, -0.1], [-1.0]] and texts == ["42", "4"]
    assert why == ["stop", "length"] and finish_reason("abort") == "stop"


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is not None, reason="vLLM installed: error path not reachable"
)
def test_vllm_missing_gives_clear_error():
    with pytest.raises(ImportError, match="rollout.backend=hf"):
        ROLLOUT_BACKENDS.get("vllm")(EngineSpec("some/model"), None)


@pytest.mark.skipif(
    importlib.util.find_spec("sglang") is not None,
    reason="SGLang installed: error path not reachable",
)
def test_sglang_missing_gives_clear_error():
    with pytest.raises(ImportError, match="rollout.backend=hf"):
        ROLLOUT_BACKENDS.get("sglang")(EngineSpec("some/model"), None)
