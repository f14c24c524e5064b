"""Pure-torch RL algorithms (no Ray): advantages, losses, KL, off-policy and imitation learners.

Every selectable method is registered by name so configs pick it with a string:

- :data:`ADVANTAGES`: ``gae``, ``grpo``, ``dr_grpo``, ``rloo``, ``reinforce_pp``,
  ``reinforce_pp_baseline`` (``algorithm.adv``), each an :class:`AdvantageEstimator` with the
  flags runners act on (``needs_critic``, ``grouped``, ``signal``)
- :data:`POLICY_LOSSES`: ``ppo``, ``pg`` (``algorithm.loss``)
- :data:`KL_ESTIMATORS`: ``k1``, ``k2``, ``k3`` (= ``low_var_kl``) (``algorithm.kl``)
- :data:`AGG_MODES`: the loss aggregation modes (``algorithm.agg_mode``)
- :data:`OFF_POLICY_LEARNERS`: ``sac``, ``rlpd``, ``crossq`` (``algorithm.name``)
"""

from learner.algorithms.advantages import (
    ADVANTAGES,
    AdvantageEstimator,
    broadcast_to_tokens,
    check_groups,
    compute_advantages,
    dr_grpo_advantages,
    gae,
    grpo_advantages,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
    reinforce_pp_returns,
    rloo_advantages,
    whiten,
)
from learner.algorithms.aggregation import (
    AGG_MODES,
    aggregate,
    global_normalizer,
    masked_mean,
    step_weights,
)
from learner.algorithms.batch_renorm import EnsembleBatchRenorm, batch_renorm
from learner.algorithms.critics import (
    CriticEnsemble,
    EnsembleLayerNorm,
    random_subset_min,
    soft_update,
)
from learner.algorithms.crossq import (
    CrossQConfig,
    CrossQLearner,
    crossq_joint_q,
    make_crossq_learner,
)
from learner.algorithms.dapo import dynamic_sampling_mask, overlong_penalty
from learner.algorithms.distributions import (
    ActionBins,
    BinnedCategorical,
    TanhGaussian,
    chunk_log_prob,
)
from learner.algorithms.imitation import (
    DaggerBuffer,
    aggregate_dagger,
    bc_loss,
    dagger_mix,
    intervention_weights,
    nll_loss,
    sft_loss,
)
from learner.algorithms.iql import (
    awr_actor_loss,
    awr_weights,
    expectile_loss,
    iql_q_loss,
    iql_q_target,
    iql_value_loss,
)
from learner.algorithms.kl import KL_ESTIMATORS, kl_estimate, kl_loss, kl_penalized_rewards
from learner.algorithms.policy_loss import (
    POLICY_LOSSES,
    entropy_from_logits,
    entropy_loss,
    pg_policy_loss,
    ppo_policy_loss,
    value_loss,
)
from learner.algorithms.rlpd import RLPDConfig, make_rlpd_learner, rlpd_update, symmetric_batch
from learner.algorithms.sac import (
    OFF_POLICY_LEARNERS,
    SACConfig,
    SACLearner,
    Temperature,
    default_target_entropy,
    make_sac_learner,
    sac_actor_loss,
    sac_critic_loss,
    sac_critic_target,
    temperature_loss,
)

__all__ = [
    "ADVANTAGES",
    "AGG_MODES",
    "KL_ESTIMATORS",
    "OFF_POLICY_LEARNERS",
    "POLICY_LOSSES",
    "ActionBins",
    "AdvantageEstimator",
    "BinnedCategorical",
    "CriticEnsemble",
    "CrossQConfig",
    "CrossQLearner",
    "DaggerBuffer",
    "EnsembleBatchRenorm",
    "EnsembleLayerNorm",
    "RLPDConfig",
    "SACConfig",
    "SACLearner",
    "TanhGaussian",
    "Temperature",
    "aggregate",
    "aggregate_dagger",
    "awr_actor_loss",
    "awr_weights",
    "batch_renorm",
    "bc_loss",
    "broadcast_to_tokens",
    "check_groups",
    "chunk_log_prob",
    "compute_advantages",
    "crossq_joint_q",
    "dagger_mix",
    "default_target_entropy",
    "dr_grpo_advantages",
    "dynamic_sampling_mask",
    "entropy_from_logits",
    "entropy_loss",
    "expectile_loss",
    "gae",
    "global_normalizer",
    "grpo_advantages",
    "intervention_weights",
    "iql_q_loss",
    "iql_q_target",
    "iql_value_loss",
    "kl_estimate",
    "kl_loss",
    "kl_penalized_rewards",
    "make_crossq_learner",
    "make_rlpd_learner",
    "make_sac_learner",
    "masked_mean",
    "nll_loss",
    "overlong_penalty",
    "pg_policy_loss",
    "ppo_policy_loss",
    "random_subset_min",
    "reinforce_pp_advantages",
    "reinforce_pp_baseline_advantages",
    "reinforce_pp_returns",
    "rloo_advantages",
    "rlpd_update",
    "sac_actor_loss",
    "sac_critic_loss",
    "sac_critic_target",
    "sft_loss",
    "soft_update",
    "step_weights",
    "symmetric_batch",
    "temperature_loss",
    "value_loss",
    "whiten",
]
