"""``EmbodiedConfig``: every knob of the on-policy embodied runner, typed, with help text.

Built with ``rlinf_contracts.config.from_dict(EmbodiedConfig, load_config(path, overrides))``; each
section validates itself and names the offending key. ``algorithm``, ``actor`` and ``train``
extend the shared sections of :mod:`learner.sections` (the reasoning runner extends the same).
``rlinf train --help-config`` prints the ``help`` of every field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from learner.sections import (
    BudgetedTrainConfig,
    EnvConfig,
    EnvRunConfig,
    EvalConfig,
    OptimConfig,
    PolicyAlgorithmConfig,
)
from learner.sections import h as _h
from rlinf_contracts.config import ConfigError

__all__ = [
    "EnvConfig",
    "EvalConfig",
    "ModelConfig",
    "AlgorithmConfig",
    "RolloutConfig",
    "ActorConfig",
    "TrainConfig",
    "PolicyRunConfig",
    "EmbodiedConfig",
]


@dataclass
class ModelConfig:
    """The policy network of :data:`learner.models.MODELS` an env runner trains and serves
    (``model:``); the reasoning runner's causal LM is :class:`learner.llm.model.LLMModelConfig`."""

    name: str = field(
        default="mlp", metadata=_h("model registry name: mlp (state) | cnn (images + state)")
    )
    hidden: list[int] = field(
        default_factory=lambda: [64, 64], metadata=_h("hidden sizes of actor and critic MLPs")
    )
    head: str = field(
        default="gaussian", metadata=_h("action head: gaussian | tanh_gaussian | binned")
    )
    init_log_std: float = field(default=-0.5, metadata=_h("initial log std of Gaussian heads"))
    n_bins: int = field(default=21, metadata=_h("bins per action dim for the binned head"))
    chunk: int = field(default=1, metadata=_h("actions per policy query (action chunk length)"))
    normalize_state: bool = field(
        default=True, metadata=_h("running mean/std normalisation of the state")
    )
    cnn_channels: list[int] = field(
        default_factory=lambda: [16, 32, 32], metadata=_h("conv channels of the image encoder")
    )
    image_feat_dim: int = field(default=64, metadata=_h("image feature size"))
    kwargs: dict[str, Any] = field(
        default_factory=dict,
        metadata=_h(
            "extra model keyword arguments (vla_*: text_encoder, flow_steps, init_log_sigma, "
            "n_bins...)"
        ),
    )

    def validate(self) -> None:
        if self.chunk < 1:
            raise ConfigError(f"key 'model.chunk' must be >= 1, got {self.chunk}")
        if not self.hidden:
            raise ConfigError("key 'model.hidden' needs at least one layer size, e.g. [64, 64]")

    def build_kwargs(self) -> dict[str, Any]:
        """Kwargs for ``learner.models.build_policy`` (JSON-able: saved in checkpoints)."""
        if self.name.startswith("vla_"):  # learner.models.vla: its own heads, same encoder knobs
            return {
                "hidden": list(self.hidden),
                "normalize_state": self.normalize_state,
                "cnn_channels": list(self.cnn_channels),
                "image_feat_dim": self.image_feat_dim,
                **self.kwargs,
            }
        head_kwargs = (
            {"n_bins": self.n_bins}
            if self.head == "binned"
            else {"init_log_std": self.init_log_std}
        )
        kw: dict[str, Any] = {
            "hidden": list(self.hidden),
            "head": self.head,
            "head_kwargs": head_kwargs,
            "normalize_state": self.normalize_state,
        }
        if self.name == "cnn":
            kw.update(cnn_channels=list(self.cnn_channels), image_feat_dim=self.image_feat_dim)
        return kw


@dataclass
class AlgorithmConfig(PolicyAlgorithmConfig):
    """PPO (``adv: gae``, with the policy's value head) or a grouped outcome estimator (``grpo``,
    ``dr_grpo``, ``rloo``: one whole episode per env row, groups reset from the same seed)."""

    ALIASES: ClassVar[dict[str, str]] = {
        "gae_lambda": "lam",
        "normalize_advantages": "whiten_adv",
        "ent_coef": "entropy_coef",
    }

    gamma: float = field(
        default=0.99,
        metadata=_h(
            "discount per policy step (GAE; outcome estimators score episodes by their discounted "
            "return)"
        ),
    )
    group_size: int = field(
        default=8,
        metadata=_h("grouped estimators (grpo...): episodes per group, reset from the same seed"),
    )
    shared_prefix: int = field(
        default=0,
        metadata=_h(
            "grouped estimators: a group's members replay their leader's actions for its first k "
            "policy steps, k uniform in 0..shared_prefix per group and iteration, then branch; "
            "shared steps are masked out of the loss, so the group mean scores the branch state "
            "(step-level credit without a critic; 0: off)"
        ),
    )
    revisit_share: float = field(
        default=0.0,
        metadata=_h(
            "outcome estimators: up to this share of each iteration's groups re-run a start state "
            "whose whole group failed earlier (an all-fail group has no advantage, so that state "
            "gets another chance to give one; 0: off)"
        ),
    )
    revisit_times: int = field(
        default=2,
        metadata=_h("algorithm.revisit_share: how often one failed state is re-run at most"),
    )
    vf_coef: float = field(
        default=0.5, metadata=_h("value loss weight (estimators with a critic only)")
    )
    vf_clip: float | None = field(
        default=None, metadata=_h("value clipping range; null = unclipped")
    )
    max_grad_norm: float = field(default=0.5, metadata=_h("gradient norm clip"))
    gae_lambda: float | None = field(default=None, metadata=_h("alias of algorithm.lam"))
    normalize_advantages: bool | None = field(
        default=None, metadata=_h("alias of algorithm.whiten_adv")
    )
    ent_coef: float | None = field(default=None, metadata=_h("alias of algorithm.entropy_coef"))

    def validate(self) -> None:
        super().validate()
        if self.gamma <= 0.0:
            raise ConfigError(f"key 'algorithm.gamma' must be in (0, 1], got {self.gamma}")
        est = self.estimator
        if not (est.needs_critic or est.signal == "outcome"):
            raise ConfigError(
                f"key 'algorithm.adv'={self.adv!r} needs token rewards, which env rollouts do not "
                "make; use gae (critic) or an outcome estimator (grpo, dr_grpo, rloo)"
            )
        if est.grouped and self.group_size < 2:
            raise ConfigError(
                f"key 'algorithm.group_size' must be >= 2 for {self.adv}, got {self.group_size}"
            )
        if self.shared_prefix < 0:
            raise ConfigError(
                f"key 'algorithm.shared_prefix' must be >= 0, got {self.shared_prefix}"
            )
        if self.shared_prefix and not est.grouped:
            raise ConfigError(
                f"key 'algorithm.shared_prefix' needs a grouped estimator (grpo, dr_grpo, rloo); "
                f"algorithm.adv={self.adv!r} has no groups"
            )
        if not 0.0 <= self.revisit_share < 1.0:
            raise ConfigError(
                f"key 'algorithm.revisit_share' must be in [0, 1), got {self.revisit_share}"
            )
        if self.revisit_share and not self.single_episode:
            raise ConfigError(
                "key 'algorithm.revisit_share' needs an outcome estimator (grpo, dr_grpo, rloo: "
                f"one episode per env row and iteration); algorithm.adv={self.adv!r} runs several"
            )
        if self.revisit_times < 1:
            raise ConfigError(
                f"key 'algorithm.revisit_times' must be >= 1, got {self.revisit_times}"
            )

    @property
    def env_group_size(self) -> int:
        """Envs reset from one seed as a group: ``group_size`` for grouped estimators, else 1."""
        return self.group_size if self.estimator.grouped else 1

    @property
    def single_episode(self) -> bool:
        """Outcome estimators score whole episodes: each env row runs exactly one per iteration."""
        return self.estimator.signal == "outcome"


@dataclass
class RolloutConfig:
    steps_per_iteration: int = field(
        default=16,
        metadata=_h("policy steps per env per iteration (gae); grpo runs one full episode"),
    )
    pipeline_stages: int = field(
        default=1,
        metadata=_h(
            "split each env worker's batch into this many micro-batches that overlap env stepping "
            "and inference"
        ),
    )
    fuse_collocated: bool = field(
        default=True,
        metadata=_h(
            "collocated placement: run env, rollout and actor of a rank in one process (no "
            "channels)"
        ),
    )
    channel_timeout: float = field(
        default=300.0, metadata=_h("seconds any channel wait may take before failing")
    )
    reallocate: bool = field(
        default=False,
        metadata=_h(
            "channel topology: the actor also trains on the env and rollout slots once the "
            "iteration's trajectories are in (learner.scheduling.realloc)"
        ),
    )

    def validate(self) -> None:
        if self.steps_per_iteration < 1:
            raise ConfigError(
                f"key 'rollout.steps_per_iteration' must be >= 1, got {self.steps_per_iteration}"
            )
        if self.pipeline_stages < 1:
            raise ConfigError(
                f"key 'rollout.pipeline_stages' must be >= 1, got {self.pipeline_stages}"
            )


@dataclass
class ActorConfig(OptimConfig):
    """The embodied PPO update (``actor:``): the shared optimiser loop plus LR annealing, a KL
    early stop, per-prefix LR scales and a critic warm-up, which
    :class:`learner.actor.ppo.PPOLearner` reads; the reasoning runner's actor is
    :class:`learner.llm.actor.LLMActorConfig`."""

    lr: float = field(default=3e-4, metadata=_h("Adam learning rate"))
    anneal_lr: bool = field(
        default=False, metadata=_h("linearly decay lr to 0 over train.iterations")
    )
    target_kl: float | None = field(
        default=None, metadata=_h("stop the epochs early when approx KL exceeds this")
    )
    lr_scale: dict[str, float] = field(
        default_factory=dict,
        metadata=_h(
            "learning-rate multipliers by parameter-name prefix, e.g. {pointer: 20, critic: 10}: "
            "parts a fine-tuned model needs to move faster than its action head (a fresh critic, a "
            "grounding choice)"
        ),
    )
    critic_warmup_iters: int = field(
        default=0,
        metadata=_h(
            "first iterations that train only the critic (no policy loss): an RL run from an SFT "
            "checkpoint starts with an untrained value head, whose advantages would otherwise "
            "steer the first policy updates"
        ),
    )

    def validate(self) -> None:
        super().validate()
        bad = {k: v for k, v in self.lr_scale.items() if not isinstance(v, (int, float)) or v <= 0}
        if bad:
            raise ConfigError(
                f"key 'actor.lr_scale' needs positive numbers per parameter prefix, got {bad}"
            )
        if self.critic_warmup_iters < 0:
            raise ConfigError(
                f"key 'actor.critic_warmup_iters' must be >= 0, got {self.critic_warmup_iters}"
            )


@dataclass
class TrainConfig(BudgetedTrainConfig):
    iterations: int = field(default=50, metadata=_h("training iterations (rollout + update)"))
    checkpoint_every: int = field(
        default=0, metadata=_h("save a checkpoint every N iterations (0 = only at the end)")
    )
    out_dir: str = field(
        default="runs/embodied", metadata=_h("run directory: checkpoints/, tb/, metrics.json")
    )
    resume: str | None = field(default=None, metadata=_h("checkpoint (or run dir) to resume from"))
    init_from: str | None = field(
        default=None,
        metadata=_h(
            "checkpoint whose model weights start this run (e.g. an SFT stage's); optimiser and "
            "iteration start fresh"
        ),
    )
    init_skip: list[str] = field(
        default_factory=list,
        metadata=_h(
            "tensor-name prefixes train.init_from does not load: they keep this config's "
            "initialisation, e.g. [head.log_sigma] -- a flow head's exploration noise, which SFT "
            "never trains, from model.kwargs.init_log_sigma"
        ),
    )
    tensorboard: bool = field(
        default=True, metadata=_h("write TensorBoard scalars under <out_dir>/tb")
    )

    def validate(self) -> None:
        super().validate()
        if self.iterations < 0 or self.checkpoint_every < 0:
            raise ConfigError("keys 'train.iterations' and 'train.checkpoint_every' must be >= 0")
        if self.init_skip and not self.init_from:
            raise ConfigError(
                f"key 'train.init_skip' ({list(self.init_skip)}) needs train.init_from: "
                "without a checkpoint to start from every tensor keeps its initialisation"
            )


@dataclass
class PolicyRunConfig(EnvRunConfig):
    """A run that trains a policy model of :data:`learner.models.MODELS` in an env (the embodied
    runner and the VLA SFT stage): what building and serving that policy reads."""

    model: ModelConfig = field(default_factory=ModelConfig, metadata=_h("policy model"))


@dataclass
class EmbodiedConfig(PolicyRunConfig):
    """The on-policy embodied runner (``runner: embodied``): PPO / GRPO on env rollouts."""

    runner: str = field(default="embodied", metadata=_h("runner registry name"))
    name: str = field(default="embodied", metadata=_h("run name (logs)"))
    placement: dict[str, str | int] | str = field(
        default_factory=lambda: {"env,rollout,actor": "all"},
        metadata=_h(
            "components -> slots (the mode follows from the sets), or 'auto': the best placement "
            "and pipeline depth the cost model predicts (learner.scheduling)"
        ),
    )
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig, metadata=_h("PPO / GRPO"))
    rollout: RolloutConfig = field(default_factory=RolloutConfig, metadata=_h("rollout"))
    actor: ActorConfig = field(default_factory=ActorConfig, metadata=_h("training worker"))
    train: TrainConfig = field(
        default_factory=TrainConfig, metadata=_h("loop, checkpoints, logging")
    )

    def validate(self) -> None:
        from learner.placement import check_placement_value, is_auto

        # 'auto' is only checked here; learner.scheduling.auto.plan resolves it after validation
        check_placement_value(self.placement)
        if self.eval.env and self.eval.env.split("/")[0] != self.env.name.split("/")[0]:
            raise ConfigError(
                f"key 'eval.env' ({self.eval.env}) must be a task of env.name's family "
                f"({self.env.name.split('/')[0]}): the policy reads that family's observations"
            )
        names = {n.strip() for key in self.placement for n in str(key).split(",")}
        if not is_auto(self.placement) and names != {"env", "rollout", "actor"}:
            raise ConfigError(
                f"key 'placement' must place exactly env, rollout and actor, got {sorted(names)}"
            )
        if self.actor.critic_warmup_iters and not self.algorithm.estimator.needs_critic:
            raise ConfigError(
                f"key 'actor.critic_warmup_iters' ({self.actor.critic_warmup_iters}) needs a "
                f"critic; algorithm.adv={self.algorithm.adv!r} has none"
            )
        if self.actor.critic_warmup_iters >= self.train.iterations:
            raise ConfigError(
                f"key 'actor.critic_warmup_iters' ({self.actor.critic_warmup_iters}) leaves no "
                f"policy update in train.iterations ({self.train.iterations})"
            )
        if self.env.num_envs % self.algorithm.env_group_size:
            raise ConfigError(
                f"key 'env.num_envs' ({self.env.num_envs}) must be a multiple of "
                f"'algorithm.group_size' ({self.algorithm.group_size}) for {self.algorithm.adv}"
            )
