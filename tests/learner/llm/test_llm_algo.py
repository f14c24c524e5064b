"""The reasoning actor's loss is the shared library's loss, micro-batched or not."""

from __future__ import annotations

import pytest
import torch

from learner.algorithms import (
    aggregate,
    dynamic_sampling_mask,
    global_normalizer,
    grpo_advantages,
    kl_loss,
    overlong_penalty,
    ppo_policy_loss,
)
from learner.llm.actor import ActorTrainer, LLMActorConfig
from learner.llm.algo import LLMAlgorithmConfig, keep_mask, shape_scores, token_advantages
from learner.llm.batch import make_train_batch, response_logprobs
from rlinf_contracts.config import ConfigError, from_dict


def _batch(tok, n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    prompts = [tok(f"{i}+{i + 1}=", add_special_tokens=False).input_ids for i in range(n)]
    responses = [
        torch.randint(
            4, len(tok), (int(torch.randint(1, 5, (1,), generator=g)),), generator=g
        ).tolist()
        for _ in range(n)
    ]
    return make_train_batch(prompts, responses, tok.pad_token_id)


@pytest.mark.parametrize(
    "agg_mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
)
@pytest.mark.parametrize("micro_batch", [0, 2, 4])
def test_actor_loss_equals_library_loss(tiny_model, tiny_tok, agg_mode, micro_batch):
    algo = LLMAlgorithmConfig(clip_low=0.2, clip_high=0.28, agg_mode=agg_mode)
    trainer = ActorTrainer(
        tiny_model, LLMActorConfig(micro_batch=micro_batch), algo, max_new_tokens=4
    )
    tb = _batch(tiny_tok)
    g = torch.Generator().manual_seed(1)
    old = (
        trainer.logprobs(tb) + 0.3 * torch.randn(tb.response_mask.shape, generator=g)
    ) * tb.response_mask
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    adv = token_advantages(algo, scores, tb.response_mask, group_size=3)
    ours, metrics = trainer.accumulate(tb, old, adv, backward=False)
    logp = response_logprobs(tiny_model, tb)
    norm = global_normalizer(tb.response_mask, agg_mode, 4.0)
    ref, ref_metrics = ppo_policy_loss(
        logp,
        old,
        adv,
        tb.response_mask,
        clip_low=0.2,
        clip_high=0.28,
        agg_mode=agg_mode,
        normalizer=norm,
    )
    assert ours == pytest.approx(float(ref.detach()), rel=1e-5, abs=1e-7)
    if micro_batch == 0:
        assert metrics["actor/clip_frac"] == pytest.approx(ref_metrics["clip_frac"])


def test_micro_batched_gradient_equals_full_batch(tiny_tok):
    from learner.llm.model import LLMModelConfig, build_model

    grads = []
    for mb in (0, 2):
        model = build_model(
            LLMModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, seed=5),
            tiny_tok,
        )
        trainer = ActorTrainer(
            model, LLMActorConfig(micro_batch=mb), LLMAlgorithmConfig(), max_new_tokens=4
        )
        tb = _batch(tiny_tok)
        old = trainer.logprobs(tb) - 0.1 * tb.response_mask
        adv = token_advantages(
            trainer.algo, torch.tensor([1.0, 0, 0, 1, 1, 0]), tb.response_mask, 2
        )
        trainer.accumulate(tb, old, adv)
        grads.append(
            torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        )
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_kl_term_is_library_kl_loss(tiny_model, tiny_tok):
    algo = LLMAlgorithmConfig(kl_coef=0.5, kl_kind="k3")
    trainer = ActorTrainer(tiny_model, LLMActorConfig(), algo, max_new_tokens=4)
    tb = _batch(tiny_tok)
    old = trainer.logprobs(tb)
    ref_lp = (old - 0.2) * tb.response_mask
    adv = torch.zeros_like(old)  # policy term 0: the loss is the KL term alone
    ours, metrics = trainer.accumulate(tb, old, adv, ref_lp, backward=False)
    logp = response_logprobs(tiny_model, tb)
    expected = 0.5 * kl_loss(logp, ref_lp, tb.response_mask, "k3", "token-mean")
    assert ours == pytest.approx(float(expected.detach()), rel=1e-5)
    assert metrics["actor/kl"] > 0


def test_grpo_token_advantages_broadcast_group_advantage():
    mask = torch.tensor([[1.0, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]])
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0])
    adv = token_advantages(LLMAlgorithmConfig(adv="grpo"), scores, mask, group_size=2)
    per_sample = grpo_advantages(scores, 2)
    assert torch.allclose(adv, per_sample[:, None] * mask)
    assert torch.all(adv[2:] == 0)  # all-equal group: no signal


def test_reinforce_pp_token_advantages_are_whitened():
    mask = torch.tensor([[1.0, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]])
    adv = token_advantages(
        LLMAlgorithmConfig(adv="reinforce_pp"), torch.tensor([1.0, 0, 1, 0]), mask, 2
    )
    valid = adv[mask.bool()]
    assert valid.mean().abs() < 1e-5 and (valid.std() - 1).abs() < 1e-4


def test_dapo_pieces_come_from_the_library():
    algo = LLMAlgorithmConfig(dynamic_sampling=True, overlong_buffer=2, overlong_factor=1.0)
    scores = torch.tensor([1.0, 1.0, 0.0, 1.0])
    assert torch.equal(keep_mask(algo, scores, 2), dynamic_sampling_mask(scores, 2))
    lengths = torch.tensor([2.0, 3.0, 4.0, 4.0])
    shaped = shape_scores(algo, scores, lengths, max_new_tokens=4)
    assert torch.allclose(shaped, scores + overlong_penalty(lengths, 4, 2, 1.0))
    assert shaped.tolist() == pytest.approx([1.0, 0.5, -1.0, 0.0])


def test_algorithm_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="algorithm.adv='grop'"):
        from_dict(LLMAlgorithmConfig, {"adv": "grop"})
    with pytest.raises(ConfigError, match="agg_mode"):
        from_dict(LLMAlgorithmConfig, {"agg_mode": "mean"})
    with pytest.raises(ConfigError, match="critic"):
        from_dict(LLMAlgorithmConfig, {"adv": "gae"})


def test_sft_step_reduces_loss(tiny_model, tiny_tok):
    trainer = ActorTrainer(tiny_model, LLMActorConfig(lr=1e-2), LLMAlgorithmConfig())
    enc = lambda s: tiny_tok(s, add_special_tokens=False).input_ids  # noqa: E731
    tb = make_train_batch(
        [enc("1+2="), enc("3+4=")], [enc("003"), enc("007")], tiny_tok.pad_token_id
    )
    first = trainer.sft_step(tb)
    for _ in range(20):
        last = trainer.sft_step(tb)
    assert last < 0.5 * first
    _ = aggregate  # the SFT loss is learner.algorithms.sft_loss (token-mean aggregate)
