"""Config sections every runner shares, and :class:`RunConfig`, the base of every runner's config.

Every top-level runner config (``EmbodiedConfig``, ``ReasoningConfig``, ``OffPolicyConfig``,
``OfflineConfig``, ``VLASFTConfig``, ``RewardClassifierConfig``) extends :class:`RunConfig`:
``runner``, ``name``, ``cluster``, ``placement`` and a ``train`` section extending
:class:`TrainLoopConfig` mean the same everywhere, so code that handles any run (the CLI's
summary and preflight, checkpoints, the run format) reads typed fields, never
``getattr(cfg, "x", default)``. The runners that act in an environment extend
:class:`EnvRunConfig` (``seed``, :class:`EnvConfig`, :class:`EvalConfig`, a
:class:`BudgetedTrainConfig`): held-out evaluation and the time budget read those. ``model`` and
``algorithm`` differ in kind between runners (an MLP policy, a SAC critic ensemble, an LLM) and
stay each runner's own; the policy-gradient ones share :class:`PolicyAlgorithmConfig` and
:class:`OptimConfig`.

Why shared bases: the embodied and reasoning runners train the same objective (a clipped
policy loss on advantages from :data:`learner.algorithms.ADVANTAGES`) with the same kind of
optimiser loop, so the knobs that mean the same thing have one name, one help text and one
validation. Each runner's section subclasses these, adds its own knobs and may change a
default (``gamma`` is 0.99 for env steps, 1.0 for tokens).

``algorithm.adv`` is resolved once, when the section is built, into
:attr:`PolicyAlgorithmConfig.estimator` (an :class:`~learner.algorithms.AdvantageEstimator`);
code reads its flags (``needs_critic``, ``grouped``, ``signal``) instead of comparing names.

Older key spellings stay valid through *aliases*: a field such as ``gae_lambda`` (help
"alias of ...") whose value, when set, moves to the canonical field during construction.

>>> a = PolicyAlgorithmConfig(adv="grpo")
>>> a.estimator.grouped, a.estimator.needs_critic
(True, False)
>>> PolicyAlgorithmConfig(adv="grop")
Traceback (most recent call last):
...
rlinf_contracts.config.errors.ConfigError: algorithm.adv='grop' is unknown; choose one of
['dr_grpo', 'gae', 'grpo', 'reinforce_pp', 'reinforce_pp_baseline', 'rloo']
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from learner.algorithms.advantages import ADVANTAGES, AdvantageEstimator
from learner.algorithms.aggregation import AGG_MODES
from learner.cluster import ClusterConfig
from rlinf_contracts.config import ConfigError

__all__ = [
    "h",
    "apply_aliases",
    "PolicyAlgorithmConfig",
    "OptimConfig",
    "TrainLoopConfig",
    "BudgetedTrainConfig",
    "EnvConfig",
    "EvalConfig",
    "RunConfig",
    "EnvRunConfig",
]


def h(text: str) -> dict[str, str]:
    """Field metadata carrying the one-line help that ``rlinf config`` prints."""
    return {"help": text}


def apply_aliases(obj: Any, section: str) -> None:
    """Move each set alias field of ``obj`` (``ALIASES``: alias -> canonical) onto its canonical
    field.

    The alias is cleared afterwards, so ``to_dict`` -> ``from_dict`` round-trips. Setting both
    to different values is an error naming both keys.
    """
    defaults = {f.name: f.default for f in dataclasses.fields(obj)}
    for alias, canonical in getattr(obj, "ALIASES", {}).items():
        value = getattr(obj, alias)
        if value is None:
            continue
        current = getattr(obj, canonical)
        if current != defaults[canonical] and current != value:
            raise ConfigError(
                f"keys '{section}.{alias}' ({value!r}) and '{section}.{canonical}' ({current!r}) "
                f"are the same setting; keep only '{section}.{canonical}'"
            )
        setattr(obj, canonical, value)
        setattr(obj, alias, None)


@dataclass
class PolicyAlgorithmConfig:
    """The clipped policy-gradient objective and its advantage estimator (``algorithm:``)."""

    ALIASES: ClassVar[dict[str, str]] = {}

    adv: str = field(
        default="gae",
        metadata=h(
            "advantage estimator (learner.algorithms.ADVANTAGES): gae needs a critic; grpo / "
            "dr_grpo / rloo use groups of samples"
        ),
    )
    gamma: float = field(default=0.99, metadata=h("discount per step (env step or token)"))
    lam: float = field(default=0.95, metadata=h("GAE lambda (adv: gae only)"))
    whiten_adv: bool = field(
        default=True,
        metadata=h(
            "whiten GAE advantages over the batch (adv: gae only; grouped estimators are "
            "normalised per group)"
        ),
    )
    clip_low: float = field(default=0.2, metadata=h("PPO ratio clip below 1"))
    clip_high: float = field(
        default=0.2, metadata=h("PPO ratio clip above 1 (DAPO clip-higher: 0.28)")
    )
    dual_clip: float | None = field(
        default=None, metadata=h("dual-clip constant c > 1 for negative advantages")
    )
    entropy_coef: float = field(default=0.0, metadata=h("entropy bonus weight"))
    agg_mode: str = field(
        default="token-mean",
        metadata=h(
            "loss aggregation (learner.algorithms.AGG_MODES): token-mean weighs every token / env "
            "step alike; seq-mean-token-mean weighs every sequence / episode alike (GRPO's "
            "original choice)"
        ),
    )

    def __post_init__(self) -> None:
        apply_aliases(self, "algorithm")
        self.estimator: AdvantageEstimator = self._resolve()

    def _resolve(self) -> AdvantageEstimator:
        if self.adv not in ADVANTAGES:
            raise ConfigError(
                f"algorithm.adv={self.adv!r} is unknown; choose one of {ADVANTAGES.names()}"
            )
        return ADVANTAGES.get(self.adv)

    def validate(self) -> None:
        self.estimator = self._resolve()  # again: ``adv`` may have been reassigned since __init__
        if not 0.0 <= self.lam <= 1.0 or not 0.0 <= self.gamma <= 1.0:
            raise ConfigError(
                f"algorithm.gamma and algorithm.lam must be in [0, 1], got {self.gamma}, {self.lam}"
            )
        if self.clip_low < 0 or self.clip_high < 0:
            raise ConfigError(
                f"algorithm.clip_low/clip_high must be >= 0, got {self.clip_low}/{self.clip_high}"
            )
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ConfigError(f"algorithm.dual_clip must be > 1, got {self.dual_clip}")
        if self.agg_mode not in AGG_MODES:
            raise ConfigError(
                f"algorithm.agg_mode={self.agg_mode!r}; choose one of {list(AGG_MODES)}"
            )


@dataclass
class OptimConfig:
    """The trainer's optimiser loop over one batch of experience (``actor:``)."""

    ALIASES: ClassVar[dict[str, str]] = {}

    lr: float = field(default=3e-4, metadata=h("learning rate"))
    epochs: int = field(default=4, metadata=h("passes over each batch of experience"))
    minibatches: int = field(
        default=4, metadata=h("optimizer steps per epoch (the batch is split)")
    )
    strategy: str = field(
        default="ddp",
        metadata=h(
            "how actor ranks share the model (learner.actor.strategies): ddp keeps a full copy "
            "per rank and all-reduces gradients; fsdp shards parameters, gradients and "
            "optimiser state over the ranks (FSDP2, sharded checkpoints)"
        ),
    )

    def __post_init__(self) -> None:
        apply_aliases(self, "actor")

    def validate(self) -> None:
        from learner.actor.strategies import check_strategy  # torch.distributed: only when checked

        check_strategy(self.strategy)
        if self.lr <= 0:
            raise ConfigError(f"key 'actor.lr' must be > 0, got {self.lr}")
        if self.epochs < 1 or self.minibatches < 1:
            raise ConfigError(
                f"keys 'actor.epochs' and 'actor.minibatches' must be >= 1, got {self.epochs}, "
                f"{self.minibatches}"
            )


@dataclass
class TrainLoopConfig:
    """The outer loop (``train:``): where a run writes its checkpoints, curves and metrics."""

    out_dir: str = field(
        default="runs/run", metadata=h("run directory: checkpoint(s), metrics.json, curves / tb")
    )


@dataclass
class BudgetedTrainConfig(TrainLoopConfig):
    """The loop of a run that ends in a held-out evaluation, under an optional time budget."""

    progress: bool = field(default=True, metadata=h("show a console progress bar"))
    final_eval: bool = field(
        default=True, metadata=h("evaluate the final policy on held-out seeds")
    )
    time_budget_s: float | None = field(
        default=None,
        metadata=h(
            "wall-clock bound (s) on training + final checkpoint + final eval, from the runner's "
            "start; training stops early enough for the estimated eval, which stops starting "
            "rounds at the deadline"
        ),
    )

    def validate(self) -> None:
        if self.time_budget_s is not None and self.time_budget_s <= 0:
            raise ConfigError(
                "key 'train.time_budget_s' must be > 0 (or null for no budget), got "
                f"{self.time_budget_s}"
            )


@dataclass
class EnvConfig:
    name: str = field(default="toy/point_reach", metadata=h("env registry name 'family/task'"))
    num_envs: int = field(
        default=32, metadata=h("total sub-envs, split over env ranks x pipeline stages")
    )
    obs_mode: str = field(
        default="state", metadata=h("observation mode passed to the env ('state', 'image'...)")
    )
    control: str | None = field(
        default=None,
        metadata=h("control mode passed to the env (e.g. 'ee_delta'); null = env default"),
    )
    max_episode_steps: int | None = field(
        default=None, metadata=h("episode length; null = env default")
    )
    kwargs: dict[str, Any] = field(
        default_factory=dict, metadata=h("extra keyword arguments for the env factory")
    )

    def validate(self) -> None:
        if "/" not in self.name:
            raise ConfigError(f"key 'env.name' must look like 'family/task', got {self.name!r}")
        if self.num_envs < 1:
            raise ConfigError(f"key 'env.num_envs' must be >= 1, got {self.num_envs}")

    def factory_kwargs(self, **extra: Any) -> dict[str, Any]:
        """Keyword arguments for ``make_env`` (unset optional knobs are left to the env)."""
        kw: dict[str, Any] = {"obs_mode": self.obs_mode, **self.kwargs}
        if self.control is not None:
            kw["control"] = self.control
        if self.max_episode_steps is not None:
            kw["max_episode_steps"] = self.max_episode_steps
        kw.update(extra)
        return kw


@dataclass
class EvalConfig:
    episodes: int = field(default=50, metadata=h("episodes per split"))
    num_envs: int = field(default=25, metadata=h("parallel eval envs"))
    seed_offset: int = field(
        default=1_000_000_000, metadata=h("held-out seeds start here (far from training seeds)")
    )
    ood_splits: list[str] = field(
        default_factory=lambda: ["id"],
        metadata=h("splits passed to the env as ood=<split>; 'id' = training distribution"),
    )
    deterministic: bool = field(
        default=True,
        metadata=h(
            "act with the policy's mode (true) or sample its action distribution, seeded (false: "
            "the stochastic policy a server with server.deterministic=false runs on a robot)"
        ),
    )
    video: bool = field(default=False, metadata=h("write <out_dir>/eval.mp4 of a few episodes"))
    video_episodes: int = field(default=2, metadata=h("episodes in the video"))
    env: str = field(
        default="",
        metadata=h(
            "env the eval runs on, with env's kwargs (e.g. RL on franka_language/hard, evaluated "
            "on franka_language/mix); empty = env.name"
        ),
    )

    def validate(self) -> None:
        if self.episodes < 1 or self.num_envs < 1:
            raise ConfigError("keys 'eval.episodes' and 'eval.num_envs' must be >= 1")
        if self.env and "/" not in self.env:
            raise ConfigError(
                "key 'eval.env' must look like 'family/task' (or be empty: env.name), got "
                f"{self.env!r}"
            )


@dataclass
class RunConfig:
    """What every run has: its runner, its name, the cluster, the placement of its components,
    and a ``train`` section (at least ``out_dir``). Subclasses narrow ``train`` to their own
    section and set their own defaults."""

    runner: str = field(default="", metadata=h("runner registry name"))
    name: str = field(default="run", metadata=h("run name (logs)"))
    cluster: ClusterConfig = field(default_factory=ClusterConfig, metadata=h("Ray cluster"))
    placement: dict[str, str | int] | str = field(
        default_factory=lambda: {"learner": "0"}, metadata=h("components -> slots")
    )
    train: TrainLoopConfig = field(default_factory=TrainLoopConfig, metadata=h("loop, outputs"))


@dataclass
class EnvRunConfig(RunConfig):
    """A run that acts in an environment: a global seed, the env and its held-out evaluation."""

    seed: int = field(default=0, metadata=h("global seed: model init, env seeds, sampling"))
    env: EnvConfig = field(default_factory=EnvConfig, metadata=h("environment"))
    eval: EvalConfig = field(default_factory=EvalConfig, metadata=h("held-out evaluation"))
    train: BudgetedTrainConfig = field(
        default_factory=BudgetedTrainConfig, metadata=h("loop, outputs")
    )
