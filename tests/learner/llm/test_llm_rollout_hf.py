"""hf rollout backend: left padding, KV-cache decode, per-token log-probs, EOS stop, top-p."""

from __future__ import annotations

import pytest
import torch

from learner.llm.batch import make_train_batch, response_logprobs
from learner.llm.rollout import ROLLOUT_BACKENDS, RolloutBatch, SamplingParams
from learner.llm.rollout.hf import left_pad, sample_next


def test_left_pad():
    ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_greedy_is_independent_of_batch_padding(tiny_model, tiny_tok):
    be = ROLLOUT_BACKENDS.get("hf")(tiny_model, tiny_tok)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6)
    alone = be.generate(["3+4="], greedy)
    mixed = be.generate(["12+13+14+15=", "3+4="], greedy)
    assert mixed.response_ids[1] == alone.response_ids[0]
    assert mixed.logprobs[1] == pytest.approx(alone.logprobs[0], abs=1e-5)


def test_logprobs_match_full_forward_and_groups_are_contiguous(tiny_model, tiny_tok):
    be = ROLLOUT_BACKENDS.get("hf")(tiny_model, tiny_tok)
    out = be.generate(["1+2=", "10+11="], SamplingParams(n=3, max_new_tokens=5, seed=0))
    assert out.prompt_index == [0, 0, 0, 1, 1, 1]
    tb = make_train_batch(out.prompt_ids, out.response_ids, tiny_tok.pad_token_id)
    with torch.no_grad():
        full = response_logprobs(tiny_model, tb)
    for i, lp in enumerate(out.logprobs):
        assert full[i, : len(lp)].tolist() == pytest.approx(lp, abs=1e-4)
        assert all(x <= 0 for x in lp)


def test_stops_at_eos_and_reports_length(tiny_model, tiny_tok):
    be = ROLLOUT_BACKENDS.get("hf")(tiny_model, tiny_tok)
    eos = tiny_tok.eos_token_id
    with torch.no_grad():  # make EOS overwhelmingly likely: every row must stop after 1 token
        tiny_model.lm_head.weight[eos] += 50.0 * tiny_model.lm_head.weight[eos].sign()
        tiny_model.model.norm.weight.abs_()
    out = be.generate(
        ["1+1=", "2+2="], SamplingParams(n=2, max_new_tokens=4, seed=1, temperature=0.0)
    )
    assert all(r[-1] == eos for r in out.response_ids if out.finish_reasons[0] == "stop")
    short = be.generate(["1+1="], SamplingParams(max_new_tokens=1, temperature=0.0))
    assert len(short.response_ids[0]) == 1


def test_length_finish_reason(tiny_model, tiny_tok):
    be = ROLLOUT_BACKENDS.get("hf")(tiny_model, tiny_tok)
    eos = tiny_tok.eos_token_id
    out = be.generate(["1+1="] * 4, SamplingParams(max_new_tokens=3, seed=0))
    for r, why in zip(out.response_ids, out.finish_reasons):
        assert (why == "stop") == (r[-1] == eos)
        assert len(r) <= 3


def test_sample_next_top_p_top_k_and_seed():
    logits = torch.tensor([[3.0, 2.0, 0.0, -1.0]] * 64)
    tok, lp = sample_next(logits, SamplingParams(top_p=0.5))
    assert (tok == 0).all() and torch.allclose(lp, torch.zeros(64))  # only the top token survives
    tok, _ = sample_next(logits, SamplingParams(top_k=2), torch.Generator().manual_seed(0))
    assert set(tok.tolist()) <= {0, 1} and len(set(tok.tolist())) == 2
    a, _ = sample_next(logits, SamplingParams(), torch.Generator().manual_seed(7))
    b, _ = sample_next(logits, SamplingParams(), torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    tok, lp = sample_next(logits[:1], SamplingParams(temperature=0.0))
    assert tok.item() == 0 and lp.item() == pytest.approx(
        torch.log_softmax(logits[0], -1)[0].item()
    )


def test_sampling_params_validation():
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ValueError, match="n must be"):
        SamplingParams(n=0)


def test_update_weights_rejects_foreign_state(tiny_model, tiny_tok):
    be = ROLLOUT_BACKENDS.get("hf")(tiny_model, tiny_tok)
    state = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    be.update_weights(state, 5)
    assert be.weight_version == 5
    with pytest.raises(KeyError, match="do not fit"):
        be.update_weights({"bogus.weight": torch.zeros(1)}, 6)


def test_rollout_batch_select_and_concat():
    b = RolloutBatch(
        [[1], [2]],
        [[3], [4, 5]],
        [[-0.1], [-0.2, -0.3]],
        ["a", "b"],
        ["stop", "length"],
        [0, 1],
        weight_version=3,
        extra={"answers": ["x", "y"]},
    )
    assert len(b) == 2 and b.num_tokens == 3
    s = b.select([1])
    assert s.texts == ["b"] and s.extra["answers"] == ["y"]
    c = RolloutBatch.concat([b, s])
    assert len(c) == 3 and c.extra["answers"] == ["x", "y", "y"] and c.weight_version == 3
