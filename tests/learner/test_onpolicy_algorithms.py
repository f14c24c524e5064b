"""Every on-policy algorithm is one :class:`~learner.algorithms.protocol.Algorithm`: ``update``
takes the batch alone, and what else a step needs (iteration, seeded minibatch order, optimiser
step count) is state that ``state_dict`` carries, so a restored learner repeats the next update."""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

from learner.actor.ppo import PPOLearner
from learner.actor.trainer import Trainer, policy_spec
from learner.algorithms.protocol import Algorithm
from learner.llm.actor import ActorTrainer, LLMActorConfig
from learner.llm.algo import LLMAlgorithmConfig
from learner.llm.batch import PolicyBatch, make_train_batch
from learner.llm.critic import CriticTrainer
from learner.llm.learner import ReasoningLearner
from learner.rollout.collect import collect_inline
from learner.rollout.envs import StageEnvs
from learner.runners.config import EmbodiedConfig
from rlinf_contracts.config import from_dict

ON_POLICY = [PPOLearner, Trainer, ActorTrainer, CriticTrainer, ReasoningLearner]


@pytest.mark.parametrize("cls", ON_POLICY, ids=lambda c: c.__name__)
def test_every_on_policy_algorithm_is_the_protocol_with_a_one_argument_update(cls: type) -> None:
    assert issubclass(cls, Algorithm), f"{cls.__name__} lacks part of the Algorithm protocol"
    params = [p for p in inspect.signature(cls.update).parameters.values() if p.name != "self"]
    assert len(params) == 1, f"{cls.__name__}.update{inspect.signature(cls.update)}"
    assert params[0].default is inspect.Parameter.empty
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_embodied_ppo_resumed_from_its_state_dict_repeats_the_next_update() -> None:
    cfg = from_dict(
        EmbodiedConfig,
        {"env": {"num_envs": 8}, "actor": {"epochs": 2, "minibatches": 3, "anneal_lr": True}},
    )
    envs = StageEnvs(cfg.env.name, 8, 1, **cfg.env.factory_kwargs())
    envs.reset(0, 0, 0)
    a = Trainer(cfg, policy_spec(cfg, envs.spec))
    traj = collect_inline(a.policy(), envs, 5, 0.9, seed=0, iteration=0, first_stream=0)
    a.update(traj)
    saved = copy.deepcopy(a.state_dict())
    assert saved["iteration"] == 1
    want = a.update(traj)
    b = Trainer(cfg, policy_spec(cfg, envs.spec))
    b.load_state_dict(saved)
    got = b.update(traj)
    assert got == want  # same lr step of the schedule, same minibatch order
    assert torch.equal(_flat(a.policy()), _flat(b.policy()))
    c = Trainer(cfg, policy_spec(cfg, envs.spec))  # without the counter: another lr, other draws
    c.load_state_dict({**saved, "iteration": 0})
    assert c.update(traj)["lr"] != want["lr"]


def test_llm_actor_resumed_from_its_state_dict_repeats_the_next_update() -> None:
    from learner.llm.arithmetic import ArithmeticConfig, tokenizer_corpus
    from learner.llm.model import LLMModelConfig, build_model
    from learner.llm.tokenizer import train_tokenizer

    tiny_tok = train_tokenizer(tokenizer_corpus(ArithmeticConfig(max_operand=20)))
    mcfg = LLMModelConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64, seed=3)
    enc = lambda s: tiny_tok(s, add_special_tokens=False).input_ids  # noqa: E731
    tb = make_train_batch(
        [enc("1+2="), enc("3+4=")] * 2,
        [enc("3"), enc("7"), enc("4"), enc("9")],
        tiny_tok.pad_token_id,
    )
    algo = LLMAlgorithmConfig()
    a = ActorTrainer(build_model(mcfg, tiny_tok), LLMActorConfig(lr=1e-2, minibatches=2), algo)
    old = a.logprobs(tb)
    batch = PolicyBatch(tb, old, torch.tensor([1.0, -1.0, 1.0, -1.0])[:, None] * tb.response_mask)
    a.update(batch)
    saved = copy.deepcopy(a.state_dict())
    assert saved["steps"] == 2
    want = a.update(batch)
    b = ActorTrainer(build_model(mcfg, tiny_tok), LLMActorConfig(lr=1e-2, minibatches=2), algo)
    b.load_state_dict(saved)
    assert b.update(batch) == pytest.approx(want) and b.steps == 4
    assert torch.equal(_flat(a.policy()), _flat(b.policy()))
