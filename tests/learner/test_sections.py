"""Shared config sections: the estimator is resolved once, old key spellings stay valid."""

from __future__ import annotations

import pytest

from learner.algorithms import ADVANTAGES
from learner.llm.actor import LLMActorConfig
from learner.llm.algo import LLMAlgorithmConfig
from learner.runners.config import AlgorithmConfig, EmbodiedConfig
from learner.sections import OptimConfig, PolicyAlgorithmConfig
from rlinf_contracts.config import ConfigError, from_dict, to_dict


def test_both_runners_extend_the_shared_sections():
    assert issubclass(AlgorithmConfig, PolicyAlgorithmConfig) and issubclass(
        LLMAlgorithmConfig, PolicyAlgorithmConfig
    )
    assert issubclass(LLMActorConfig, OptimConfig)
    assert (AlgorithmConfig().gamma, LLMAlgorithmConfig().gamma) == (0.99, 1.0)  # runner defaults


@pytest.mark.parametrize("name", ADVANTAGES.names())
def test_estimator_is_the_registry_entry(name):
    assert from_dict(PolicyAlgorithmConfig, {"adv": name}).estimator is ADVANTAGES.get(name)


def test_embodied_flags_follow_the_estimator():
    grpo = from_dict(AlgorithmConfig, {"adv": "grpo", "group_size": 4})
    assert (grpo.env_group_size, grpo.single_episode, grpo.estimator.needs_critic) == (
        4,
        True,
        False,
    )
    rloo = from_dict(
        AlgorithmConfig, {"adv": "rloo", "group_size": 4}
    )  # any outcome estimator works
    assert (rloo.env_group_size, rloo.single_episode) == (4, True)
    gae = from_dict(AlgorithmConfig, {"adv": "gae", "group_size": 4})
    assert (gae.env_group_size, gae.single_episode, gae.estimator.needs_critic) == (1, False, True)
    with pytest.raises(ConfigError, match="token rewards"):
        from_dict(AlgorithmConfig, {"adv": "reinforce_pp"})
    with pytest.raises(ConfigError, match="env.num_envs"):
        from_dict(
            EmbodiedConfig,
            {"algorithm": {"adv": "dr_grpo", "group_size": 3}, "env": {"num_envs": 16}},
        )


def test_old_key_spellings_are_aliases():
    algo = from_dict(
        AlgorithmConfig, {"gae_lambda": 0.9, "ent_coef": 0.01, "normalize_advantages": False}
    )
    assert (algo.lam, algo.entropy_coef, algo.whiten_adv) == (0.9, 0.01, False)
    assert from_dict(AlgorithmConfig, to_dict(algo)) == algo  # round trip (aliases cleared)
    actor = from_dict(LLMActorConfig, {"ppo_epochs": 3, "mini_batches": 2})
    assert (actor.epochs, actor.minibatches, actor.ppo_epochs) == (3, 2, None)
    with pytest.raises(ConfigError, match="'algorithm.gae_lambda'.*'algorithm.lam'"):
        from_dict(AlgorithmConfig, {"gae_lambda": 0.9, "lam": 0.8})
