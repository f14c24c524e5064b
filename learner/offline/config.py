"""``OfflineConfig``: the offline runner (``runner: offline``): IQL, BC, DAgger on stored episodes.

>>> from rlinf_contracts.config import from_dict
>>> from_dict(OfflineConfig, {"data": {"demos": "d"}}).algorithm.name
'bc'
>>> from_dict(OfflineConfig, {"algorithm": {"name": "cql"}, "data": {"demos": "d"}})
Traceback (most recent call last):
...
rlinf_contracts.config.errors.ConfigError: algorithm: key 'algorithm.name'='cql' is unknown; choose
one of ['bc', 'dagger', 'iql']
"""

from __future__ import annotations

from dataclasses import dataclass, field

from learner.cluster import ClusterConfig
from learner.sections import BudgetedTrainConfig, EnvConfig, EnvRunConfig
from learner.sections import h as _h
from rlinf_contracts.config import ConfigError

ALGORITHMS = ("bc", "dagger", "iql")


@dataclass
class OfflineAlgorithmConfig:
    name: str = field(
        default="bc",
        metadata=_h(
            "bc (behaviour cloning) | iql (implicit Q-learning) | dagger (BC + sim-oracle "
            "relabelled rollouts)"
        ),
    )
    lr: float = field(default=3e-4, metadata=_h("Adam learning rate of every network"))
    batch_size: int = field(default=256, metadata=_h("transitions per update"))
    gamma: float = field(default=0.97, metadata=_h("iql: discount"))
    expectile: float = field(
        default=0.7, metadata=_h("iql: expectile tau of the value loss (0.7-0.9)")
    )
    beta: float = field(
        default=3.0, metadata=_h("iql: inverse temperature of the advantage weights")
    )
    tau: float = field(default=0.005, metadata=_h("iql: Polyak rate of the target critics"))
    n_critics: int = field(default=2, metadata=_h("iql: Q ensemble size (min over members)"))
    rounds: int = field(
        default=5, metadata=_h("dagger: roll out / relabel / retrain rounds after the BC round")
    )
    round_env_steps: int = field(
        default=2_000,
        metadata=_h("dagger: learner-policy transitions labelled by the oracle per round"),
    )
    expert_beta: float = field(
        default=0.5,
        metadata=_h(
            "dagger: probability of executing the expert's action in round 1, decayed x0.5 per "
            "round"
        ),
    )

    def validate(self) -> None:
        if self.name not in ALGORITHMS:
            raise ConfigError(
                f"key 'algorithm.name'={self.name!r} is unknown; choose one of {list(ALGORITHMS)}"
            )
        if not 0.0 < self.expectile < 1.0:
            raise ConfigError(f"key 'algorithm.expectile' must be in (0, 1), got {self.expectile}")
        if self.lr <= 0 or self.batch_size < 1 or self.rounds < 0 or self.round_env_steps < 1:
            raise ConfigError(
                "keys 'algorithm.lr' > 0, 'algorithm.batch_size' >= 1, 'algorithm.rounds' >= 0, "
                "'algorithm.round_env_steps' >= 1"
            )


@dataclass
class OfflineModelConfig:
    hidden: list[int] = field(
        default_factory=lambda: [256, 256],
        metadata=_h("hidden sizes of actor, critics and value MLPs"),
    )


@dataclass
class OfflineData:
    demos: str = field(
        default="", metadata=_h("episode store to learn from (rlinf collect ... --out DIR)")
    )

    def validate(self) -> None:
        if not self.demos:
            raise ConfigError(
                "key 'data.demos' is required: the episode store to learn from "
                "(record one with 'rlinf collect ENV --out DIR')"
            )


@dataclass
class OfflineTrainConfig(BudgetedTrainConfig):
    updates: int = field(default=10_000, metadata=_h("gradient updates (dagger: per round)"))
    log_every: int = field(default=500, metadata=_h("updates between two metrics rows"))
    out_dir: str = field(
        default="runs/offline", metadata=_h("run directory: checkpoints/, metrics.json, curves.png")
    )
    tensorboard: bool = field(
        default=False, metadata=_h("write TensorBoard scalars under <out_dir>/tb")
    )
    time_budget_s: float | None = field(
        default=None, metadata=_h("wall-clock bound (s) on the final eval's deadline")
    )

    def validate(self) -> None:
        super().validate()
        if self.updates < 1 or self.log_every < 1:
            raise ConfigError("keys 'train.updates' and 'train.log_every' must be >= 1")


@dataclass
class OfflineConfig(EnvRunConfig):
    """The offline runner (``runner: offline``): one local process, no env stepping but DAgger's."""

    runner: str = field(default="offline", metadata=_h("runner registry name"))
    name: str = field(default="offline", metadata=_h("run name (logs)"))
    cluster: ClusterConfig = field(
        default_factory=ClusterConfig, metadata=_h("Ray cluster (unused: one local process)")
    )
    placement: dict[str, str | int] = field(
        default_factory=lambda: {"learner": "0"}, metadata=_h("learner -> slot (one process)")
    )
    env: EnvConfig = field(
        default_factory=lambda: EnvConfig(num_envs=8),
        metadata=_h("the env of the demos: held-out eval and dagger rollouts"),
    )
    model: OfflineModelConfig = field(default_factory=OfflineModelConfig, metadata=_h("networks"))
    algorithm: OfflineAlgorithmConfig = field(
        default_factory=OfflineAlgorithmConfig, metadata=_h("IQL / BC / DAgger")
    )
    data: OfflineData = field(default_factory=OfflineData, metadata=_h("episode store"))
    train: OfflineTrainConfig = field(
        default_factory=OfflineTrainConfig, metadata=_h("loop, outputs")
    )

    def validate(self) -> None:
        self.data.validate()  # also when the config has no data section at all
