"""PPO with a critic (``algorithm.adv: gae``): the critic's loss and the actor's advantages are the
shared library's, one step trains both models, and the config refuses half a setup."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from learner.algorithms import gae, global_normalizer, value_loss, whiten
from learner.llm.actor import ActorTrainer, LLMActorConfig
from learner.llm.algo import LLMAlgorithmConfig, gae_advantages, token_advantages, token_rewards
from learner.llm.batch import PolicyBatch, make_train_batch
from learner.llm.critic import CriticConfig, CriticTrainer, build_critic
from learner.llm.model import LLMModelConfig, build_model
from rlinf_contracts.config import ConfigError, from_dict, load_config

ROOT = Path(__file__).resolve().parents[3]
MODEL_CFG = LLMModelConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64, seed=3)


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


def _ppo_algo(**kw) -> LLMAlgorithmConfig:
    return from_dict(
        LLMAlgorithmConfig, {"adv": "gae", "critic": {"lr": 1e-2, "value_clip": 0.2}, **kw}
    )


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


@pytest.mark.parametrize("micro_batch", [0, 2])
@pytest.mark.parametrize("clip", [None, 0.2])
def test_critic_loss_equals_library_value_loss(tiny_tok, tiny_model, micro_batch, clip):
    ccfg = CriticConfig(value_clip=clip)
    critic = CriticTrainer(
        build_critic(MODEL_CFG, ccfg, tiny_tok, tiny_model), ccfg, micro_batch=micro_batch
    )
    tb = _batch(tiny_tok)
    g = torch.Generator().manual_seed(2)
    old = (
        critic.values(tb) + 0.3 * torch.randn(tb.response_mask.shape, generator=g)
    ) * tb.response_mask
    returns = torch.rand(tb.response_mask.shape, generator=g) * tb.response_mask
    ours, metrics = critic.accumulate(tb, old, returns, backward=False)
    expected, lib_metrics = value_loss(
        critic.model(tb),
        old,
        returns,
        tb.response_mask,
        clip=clip,
        agg_mode="token-mean",
        normalizer=global_normalizer(tb.response_mask, "token-mean"),
    )
    assert ours == pytest.approx(float(expected.detach()), rel=1e-5, abs=1e-7)
    assert ours > 0
    if micro_batch == 0:
        assert metrics["critic/vf_clip_frac"] == pytest.approx(lib_metrics["vf_clip_frac"])


def test_critic_values_align_with_response_tokens(tiny_tok, tiny_model):
    """V_t reads the hidden state before token t: a value depends on the prefix, never on token t
    itself."""
    ccfg = CriticConfig()
    critic = CriticTrainer(build_critic(MODEL_CFG, ccfg, tiny_tok, tiny_model), ccfg)
    enc = lambda s: tiny_tok(s, add_special_tokens=False).input_ids  # noqa: E731
    a = make_train_batch([enc("1+2=")], [enc("003")], tiny_tok.pad_token_id)
    b = make_train_batch([enc("1+2=")], [enc("009")], tiny_tok.pad_token_id)
    va, vb = critic.values(a), critic.values(b)
    assert va.shape == a.response_mask.shape
    differs = (a.responses != b.responses)[0].nonzero()[0, 0]  # first differing response token
    assert torch.allclose(va[0, : differs + 1], vb[0, : differs + 1])  # same prefix -> same value
    padded = make_train_batch(
        [enc("1+2="), enc("1+2=")], [enc("003"), enc("0")], tiny_tok.pad_token_id
    )
    vp = critic.values(padded)
    assert torch.all(vp[1, padded.response_mask[1] == 0] == 0)


def test_gae_advantages_are_library_gae(tiny_tok):
    tb = _batch(tiny_tok)
    mask = tb.response_mask
    g = torch.Generator().manual_seed(4)
    scores = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    values = torch.rand(mask.shape, generator=g) * mask
    logp, ref = (
        -torch.rand(mask.shape, generator=g) * mask,
        -torch.rand(mask.shape, generator=g) * mask,
    )
    algo = _ppo_algo(gamma=0.99, lam=0.9, whiten_adv=False, kl_coef=0.1, kl_in_reward=True)
    adv, returns = gae_advantages(algo, scores, mask, values, logp, ref)
    # the rewards: score on the last response token, minus 0.1 * k3 KL on every response token
    last = torch.zeros_like(mask)
    last[torch.arange(len(mask)), mask.sum(-1).long() - 1] = 1.0
    kl = torch.exp(ref - logp) - (ref - logp) - 1.0
    rewards = token_rewards(algo, scores, mask, logp, ref)
    assert torch.allclose(rewards, (last * scores[:, None] - 0.1 * kl) * mask, atol=1e-6)
    lib_adv, lib_ret = gae(rewards, values, mask, 0.99, 0.9)
    assert torch.equal(adv, lib_adv) and torch.equal(returns, lib_ret)
    adv_w, ret_w = gae_advantages(
        _ppo_algo(gamma=0.99, lam=0.9, kl_coef=0.1, kl_in_reward=True),
        scores,
        mask,
        values,
        logp,
        ref,
    )
    assert torch.allclose(adv_w, whiten(lib_adv, mask)) and torch.equal(ret_w, lib_ret)
    with pytest.raises(ValueError, match="gae_advantages"):
        token_advantages(algo, scores, mask, group_size=3)


def test_ppo_step_trains_actor_and_critic(tiny_tok):
    actor_model = build_model(MODEL_CFG, tiny_tok)
    algo = _ppo_algo()
    critic = CriticTrainer(build_critic(MODEL_CFG, algo.critic, tiny_tok, actor_model), algo.critic)
    backbone_before = torch.cat([p.detach().flatten() for p in critic.model.backbone.parameters()])
    assert torch.equal(
        backbone_before, torch.cat([p.detach().flatten() for p in actor_model.model.parameters()])
    )
    trainer = ActorTrainer(
        actor_model, LLMActorConfig(lr=1e-3), algo, max_new_tokens=4, critic=critic
    )
    tb = _batch(tiny_tok)
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    old = trainer.logprobs(tb)
    values = critic.values(tb)
    adv, returns = gae_advantages(algo, scores, tb.response_mask, values, old)
    a0, c0 = _flat(actor_model), _flat(critic.model)
    first, _ = critic.accumulate(tb, values, returns, backward=False)
    metrics = trainer.update(PolicyBatch(tb, old, adv, old_values=values, returns=returns))
    assert not torch.equal(a0, _flat(actor_model)) and not torch.equal(c0, _flat(critic.model))
    assert metrics["critic/loss"] == pytest.approx(first, rel=1e-5)  # loss before the (only) step
    assert {"actor/loss", "critic/grad_norm", "critic/vf_clip_frac"} <= set(metrics)
    for _ in range(5):  # a few more critic updates on the same fixed batch
        critic.update(PolicyBatch(tb, old, adv, old_values=critic.values(tb), returns=returns))
    last, _ = critic.accumulate(tb, critic.values(tb), returns, backward=False)
    assert last < 0.5 * first
    with pytest.raises(ValueError, match="critic"):
        ActorTrainer(build_model(MODEL_CFG, tiny_tok), LLMActorConfig(), algo).update(
            PolicyBatch(tb, old, adv, old_values=values, returns=returns)
        )


def test_inline_ppo_run_trains_and_saves_critic(tmp_path):
    from learner.runners.reasoning import ReasoningConfig, run

    raw = load_config(
        ROOT / "configs/llm_ppo_arith.yaml",
        [
            "sft.steps=2",
            "sft.batch_size=8",
            "train.steps=2",
            "train.prompts_per_step=4",
            "rollout.n=2",
            "train.eval_every=1",
            "data.eval_limit=4",
            "data.arithmetic.max_operand=20",
            f"train.out_dir={tmp_path}",
        ],
    )
    result = run(from_dict(ReasoningConfig, raw), None)
    with open(result["csv"]) as f:
        rl = [r for r in csv.DictReader(f) if r["phase"] == "rl"]
    assert len(rl) == 2 and result["actor_digest"] != result["sft_digest"]
    assert result["rollout_digests"] == [result["actor_digest"]]
    for row in rl:
        assert float(row["critic/loss"]) > 0 and float(row["critic/grad_norm"]) > 0
        assert float(row["actor/loss"]) == float(row["actor/loss"])  # not NaN
    assert Path(result["checkpoint"], "critic.safetensors").is_file()


def test_ppo_config_validates_and_bad_combinations_name_the_key():
    from learner.runners.reasoning import ReasoningConfig

    cfg = from_dict(ReasoningConfig, load_config(ROOT / "configs/llm_ppo_arith.yaml"))
    assert cfg.algorithm.adv == "gae" and cfg.algorithm.critic is not None
    assert (cfg.algorithm.gamma, cfg.algorithm.lam) == (1.0, 0.95)
    with pytest.raises(ConfigError, match=r"algorithm.adv=gae needs a critic.*algorithm.critic"):
        from_dict(
            ReasoningConfig,
            load_config(ROOT / "configs/llm_ppo_arith.yaml", ["algorithm.critic=null"]),
        )
    with pytest.raises(ConfigError, match=r"algorithm.critic is set but algorithm.adv='grpo'"):
        from_dict(LLMAlgorithmConfig, {"adv": "grpo", "critic": {}})
    with pytest.raises(ConfigError, match=r"algorithm.critic.value_clip must be > 0"):
        from_dict(LLMAlgorithmConfig, {"adv": "gae", "critic": {"value_clip": -1.0}})
    with pytest.raises(ConfigError, match="algorithm.lam"):
        from_dict(LLMAlgorithmConfig, {"adv": "gae", "critic": {}, "lam": 1.5})
    with pytest.raises(ConfigError, match="unknown key 'algorithm.critic.lrr'"):
        from_dict(LLMAlgorithmConfig, {"adv": "gae", "critic": {"lrr": 1.0}}, path="algorithm")


@pytest.mark.ray
def test_ppo_worker_groups_keep_the_critic_in_the_actor_process(ray_cluster, tmp_path):
    """Disaggregated worker groups: the critic lives in the actor worker, no extra group is
    placed."""
    from learner.runners.reasoning import ReasoningConfig, run

    raw = load_config(
        ROOT / "configs/llm_ppo_arith.yaml",
        [
            "sft.steps=2",
            "sft.batch_size=8",
            "train.steps=2",
            "train.prompts_per_step=4",
            "rollout.n=2",
            "rollout.micro_batch_prompts=2",
            "train.eval_every=1",
            "data.eval_limit=4",
            "data.arithmetic.max_operand=20",
            f"train.out_dir={tmp_path}",
            "train.driver=workers",
            "train.timeout_s=120",
        ],
    )
    raw["placement"] = {"rollout": "0", "reward": "1", "actor": "2"}
    result = run(from_dict(ReasoningConfig, raw), ray_cluster)
    assert result["disaggregated"] and result["rollout_digests"] == [result["actor_digest"]]
    with open(result["csv"]) as f:
        rl = [r for r in csv.DictReader(f) if r["phase"] == "rl"]
    assert len(rl) == 2 and all(float(r["critic/loss"]) > 0 for r in rl)
    assert Path(result["checkpoint"], "critic.safetensors").is_file()
