"""``OffPolicyConfig``: the off-policy runner's knobs (SAC / RLPD / CrossQ), typed, with help text.

Built once with ``from_dict(OffPolicyConfig, load_config(path, overrides))``; each section
validates itself and names the offending key. ``env`` and ``eval`` are the embodied runner's
sections (same env kwargs, same held-out evaluation); ``placement`` places ``env``, ``learner``
and ``replay``, and with ``ingest.enabled`` optionally ``server``: the robot sites' policy servers
the run starts itself (``learner.offpolicy.servers``).

>>> from rlinf_contracts.config import from_dict
>>> raw = {"algorithm": {"name": "rlpd"}, "train": {"demos": "runs/demos/push"}}
>>> cfg = from_dict(OffPolicyConfig, raw)
>>> cfg.algorithm.critics(), cfg.algorithm.critic_subset
(10, 2)
>>> from_dict(OffPolicyConfig, {"algorithm": {"name": "sacc"}})
Traceback (most recent call last):
...
rlinf_contracts.config.errors.ConfigError: algorithm: key 'algorithm.name'='sacc' is unknown; choose
one of ['crossq', 'rlpd', 'sac']
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from learner.live.config import LiveSection
from learner.offpolicy.robot_sections import IngestSection, PushSection, ServersSection
from learner.sections import BudgetedTrainConfig, EnvConfig, EnvRunConfig
from learner.sections import h as _h
from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import did_you_mean

COMPONENTS = ("env", "learner", "replay")
SERVER = "server"  # optional: the robots' policy servers of an online run, placed like the rest
OPTIONAL = (SERVER,)
ALGORITHMS = {"sac": 2, "rlpd": 10, "crossq": 2}  # name -> default ensemble size
INTERVENTION_ROUTES = ("demo", "online")  # replay.interventions
FEATURES_ON = ("env", "learner")  # model.encoder.features_on


@dataclass
class EncoderSection:
    """``model.encoder``: the pixel encoder kind reading the cameras (``encoder_kinds``)."""

    kind: str = field(
        default="cnn",
        metadata=_h(
            "cnn: the trainable DrQ encoder (model.cnn_channels, trained by the critic on shifted "
            "pixels) | frozen: a pretrained backbone that never trains, its features computed "
            "once per frame and stored in the replay instead of pixels, then a trainable head"
        ),
    )
    weights: str | None = field(
        default=None,
        metadata=_h(
            "frozen: backbone weights -- the run dir or checkpoint of 'rlinf train "
            "configs/encoder_pretrain.yaml', a .safetensors file or a torch state dict"
        ),
    )
    backbone: str = field(
        default="keypoints",
        metadata=_h(
            "frozen: the pretrained network -- keypoints (rlinf train "
            "configs/encoder_pretrain.yaml) | resnet10 (SERL / HIL-SERL's resnet10_params.pkl) "
            "| dinov2_vits14 / dinov2_vitb14 (+ _reg: with registers; DINOv2's released .pth or "
            "a Hugging Face model.safetensors)"
        ),
    )
    channels: list[int] = field(
        default_factory=lambda: [16, 16, 32],
        metadata=_h("frozen keypoints: the backbone's conv channels (must match the weights)"),
    )
    grid: int = field(
        default=0,
        metadata=_h(
            "frozen: also read each keypoint channel's softmax mass over a grid x grid grid "
            "(0 = keypoints only); a channel firing on two objects keeps both places"
        ),
    )
    head: str = field(
        default="linear",
        metadata=_h(
            "frozen: what the policy reads of the features -- linear: a trained projection "
            "(linear, LayerNorm, tanh) to model.image_feat_dim | raw: the features themselves"
        ),
    )
    cached_views: int = field(
        default=4,
        metadata=_h(
            "frozen: views of each frame cached in the replay -- the frame itself and "
            "cached_views-1 random shifts of up to model.augment_pad px; each sample reads one "
            "(DrQ's augmentation paid once per frame; 1 = no augmentation)"
        ),
    )

    features_on: str = field(
        default="env",
        metadata=_h(
            "frozen, with env workers: where the backbone runs over new frames -- env (each env "
            "worker over its finished episodes; the learner's core keeps to the updates) | "
            "learner (as frames enter the replay)"
        ),
    )

    def validate(self) -> None:
        if self.features_on not in FEATURES_ON:
            raise ConfigError(
                f"key 'model.encoder.features_on'={self.features_on!r} is unknown"
                f"{did_you_mean(self.features_on, FEATURES_ON)}; choose one of {list(FEATURES_ON)}"
            )
        if self.kind != "cnn":  # the registry imports torch: only for a non-default kind
            from learner.models.offpolicy import ENCODER_KINDS

            if self.kind not in ENCODER_KINDS.names():
                raise ConfigError(
                    f"key 'model.encoder.kind'={self.kind!r} is unknown; choose one of "
                    f"{ENCODER_KINDS.names()}"
                )
        if self.kind == "frozen":
            from learner.models.encoder_kinds import BACKBONES, FROZEN_HEADS

            for key, value, known in (
                ("head", self.head, FROZEN_HEADS.names()),
                ("backbone", self.backbone, BACKBONES.names()),
            ):
                if value not in known:
                    raise ConfigError(
                        f"key 'model.encoder.{key}'={value!r} is unknown"
                        f"{did_you_mean(value, known)}; choose one of {known}"
                    )
            if self.grid and self.backbone != "keypoints":
                raise ConfigError(
                    "key 'model.encoder.grid' reads the keypoint backbone's channels; "
                    f"model.encoder.backbone={self.backbone!r} has no keypoints (set grid: 0)"
                )
        if self.kind == "frozen" and not self.weights:
            raise ConfigError(
                "key 'model.encoder.weights' is required by model.encoder.kind=frozen (a frozen "
                "random backbone learns nothing); pretrain one with 'rlinf train "
                "configs/encoder_pretrain.yaml'"
            )
        if not self.channels or self.cached_views < 1 or not 0 <= self.grid <= 16:
            raise ConfigError(
                f"keys 'model.encoder.channels' (>= 1 layer) / 'model.encoder.cached_views' (>= 1) "
                f"/ 'model.encoder.grid' (0-16) out of range: {self.channels}, "
                f"{self.cached_views}, {self.grid}"
            )

    def build_kwargs(self) -> dict[str, Any] | None:
        """The policy's ``encoder`` kwarg (None for cnn: today's kwargs, unchanged)."""
        if self.kind == "cnn":
            return None
        kw: dict[str, Any] = {"kind": self.kind, "channels": list(self.channels)}
        if self.grid:
            kw["grid"] = self.grid
        if self.head != "linear":
            kw["head"] = self.head
        if self.backbone != "keypoints":
            kw["backbone"] = self.backbone
        return kw


@dataclass
class OffPolicyModelConfig:
    hidden: list[int] = field(
        default_factory=lambda: [256, 256], metadata=_h("hidden sizes of the actor MLP")
    )
    critic_hidden: list[int] = field(
        default_factory=lambda: [256, 256],
        metadata=_h("hidden sizes of each critic MLP (CrossQ paper: [2048, 2048])"),
    )
    use_images: bool = field(
        default=False,
        metadata=_h(
            "encode the env's cameras with a CNN shared by actor and critic (DrQ); needs an image "
            "obs_mode"
        ),
    )
    cnn_channels: list[int] = field(
        default_factory=lambda: [16, 32, 32],
        metadata=_h("channels of the stride-2 convs of the pixel encoder"),
    )
    image_feat_dim: int = field(
        default=50, metadata=_h("pixel feature size (after LayerNorm + tanh)")
    )
    augment_pad: int = field(
        default=4,
        metadata=_h(
            "DrQ random shift: pad by this many pixels and crop back at a random offset (0 = off)"
        ),
    )
    encoder: EncoderSection = field(
        default_factory=EncoderSection, metadata=_h("pixel encoder kind (cnn | frozen), weights")
    )

    def validate(self) -> None:
        if not self.hidden or not self.critic_hidden:
            raise ConfigError(
                "keys 'model.hidden' and 'model.critic_hidden' need at least one layer size"
            )
        if self.augment_pad < 0:
            raise ConfigError(f"key 'model.augment_pad' must be >= 0, got {self.augment_pad}")
        if self.encoder.kind != "cnn" and not self.use_images:
            raise ConfigError(
                f"key 'model.encoder.kind'={self.encoder.kind!r} encodes cameras: set "
                "model.use_images: true (and an image env.obs_mode)"
            )

    def build_kwargs(self) -> dict[str, Any]:
        """Kwargs of ``build_policy("sac", ...)`` (JSON-able: saved in checkpoints)."""
        kw: dict[str, Any] = {"hidden": list(self.hidden), "use_images": self.use_images}
        if self.use_images:
            kw.update(cnn_channels=list(self.cnn_channels), image_feat_dim=self.image_feat_dim)
            if self.encoder.build_kwargs() is not None:
                kw["encoder"] = self.encoder.build_kwargs()
        return kw


@dataclass
class OffPolicyAlgorithmConfig:
    name: str = field(
        default="sac",
        metadata=_h(
            "sac | rlpd (LayerNorm ensemble, random-2 min, symmetric demo sampling) | crossq "
            "(batch renorm, no target)"
        ),
    )
    gamma: float = field(default=0.99, metadata=_h("discount per env step (HIL-SERL: 0.97)"))
    n_step: int = field(default=1, metadata=_h("n-step returns from the replay"))
    tau: float = field(
        default=0.005, metadata=_h("Polyak rate of the target critics (not used by crossq)")
    )
    actor_lr: float = field(default=3e-4, metadata=_h("actor Adam learning rate"))
    critic_lr: float = field(
        default=3e-4, metadata=_h("critic (and pixel encoder) Adam learning rate")
    )
    alpha_lr: float = field(default=3e-4, metadata=_h("temperature Adam learning rate"))
    init_alpha: float = field(default=1.0, metadata=_h("initial entropy temperature"))
    target_entropy: float | None = field(
        default=None, metadata=_h("entropy target; null = -|A| (sac, crossq) or -|A|/2 (rlpd)")
    )
    n_critics: int | None = field(
        default=None, metadata=_h("critic ensemble size; null = 2 (sac, crossq) or 10 (rlpd)")
    )
    critic_subset: int | None = field(
        default=None, metadata=_h("rlpd: target min over a random subset of this size (null = 2)")
    )
    utd_ratio: float = field(
        default=1.0,
        metadata=_h("critic updates per env transition (RLPD paper: 20; fractions allowed)"),
    )
    policy_delay: int | None = field(
        default=None,
        metadata=_h("critic:actor update ratio (SERL 4:1); null = 1 (sac, rlpd) or 3 (crossq)"),
    )
    batch_size: int = field(default=256, metadata=_h("transitions per update"))
    max_backlog_updates: int | None = field(
        default=None,
        metadata=_h(
            "most owed updates carried while the learner is slower than the data arrives; owed "
            "updates beyond it are dropped (counted in learner/dropped_updates) and the kept "
            "ratio is logged as learner/utd_effective. null = one episode's worth (utd_ratio x "
            "max episode steps) when robots stream (ingest.enabled), no cap in simulation (the "
            "env waits for the learner there); 0 = no cap"
        ),
    )
    adam_beta1: float | None = field(
        default=None, metadata=_h("Adam beta1; null = 0.9 (sac, rlpd) or 0.5 (crossq)")
    )
    bc_weight: float = field(
        default=0.0,
        metadata=_h(
            "actor: + this x the squared error of its deterministic action to the action of each "
            "prior row in the batch (the demos and a human's taken-over steps); 0 = pure RL"
        ),
    )

    def validate(self) -> None:
        if self.name not in ALGORITHMS:
            raise ConfigError(
                f"key 'algorithm.name'={self.name!r} is unknown; choose one of {sorted(ALGORITHMS)}"
            )
        if not 0.0 < self.gamma <= 1.0 or not 0.0 < self.tau <= 1.0:
            raise ConfigError(
                f"keys 'algorithm.gamma' / 'algorithm.tau' must be in (0, 1], got {self.gamma}, "
                f"{self.tau}"
            )
        if self.n_step < 1 or self.batch_size < 1 or self.utd_ratio <= 0:
            raise ConfigError(
                "keys 'algorithm.n_step', 'algorithm.batch_size' must be >= 1 and "
                "'algorithm.utd_ratio' > 0"
            )
        if self.critic_subset is not None and not 1 <= self.critic_subset <= self.critics():
            raise ConfigError(
                f"key 'algorithm.critic_subset'={self.critic_subset} must be in [1, "
                f"n_critics={self.critics()}]"
            )
        if self.policy_delay is not None and self.policy_delay < 1:
            raise ConfigError(f"key 'algorithm.policy_delay' must be >= 1, got {self.policy_delay}")
        if self.max_backlog_updates is not None and self.max_backlog_updates < 0:
            raise ConfigError(
                f"key 'algorithm.max_backlog_updates' must be >= 0 (0 = no cap), got "
                f"{self.max_backlog_updates}"
            )
        if not math.isfinite(self.bc_weight) or self.bc_weight < 0:
            raise ConfigError(f"key 'algorithm.bc_weight' must be >= 0, got {self.bc_weight}")
        if self.name == "rlpd" and self.critic_subset is None:
            self.critic_subset = 2

    def critics(self) -> int:
        return self.n_critics if self.n_critics is not None else ALGORITHMS[self.name]


@dataclass
class ReplaySection:
    capacity: int = field(
        default=1_000_000, metadata=_h("transitions kept per source (demo / online)")
    )
    demo_ratio: float = field(
        default=0.5,
        metadata=_h("share of each batch drawn from the demos when there are demos (RLPD: 0.5)"),
    )
    per_robot: bool = field(
        default=False,
        metadata=_h(
            "false: pooled (every stored transition equally likely); true: each batch draws a "
            "robot uniformly, then a transition of that robot, so a robot streaming faster or "
            "flooding after a reconnect does not dominate (rlinf_data.replay)"
        ),
    )

    interventions: str = field(
        default="demo",
        metadata=_h(
            "where a human's taken-over steps go besides the online data -- demo: into the prior "
            "data too, drawn at replay.demo_ratio (HIL-SERL's learner; needs train.demos) | "
            "online: nowhere else"
        ),
    )

    def validate(self) -> None:
        if self.interventions not in INTERVENTION_ROUTES:
            raise ConfigError(
                f"key 'replay.interventions'={self.interventions!r} is unknown"
                f"{did_you_mean(self.interventions, INTERVENTION_ROUTES)}; choose one of "
                f"{list(INTERVENTION_ROUTES)}"
            )
        if self.capacity < 2 or not 0.0 <= self.demo_ratio < 1.0:
            raise ConfigError(
                f"keys 'replay.capacity' (>= 2) / 'replay.demo_ratio' ([0, 1)) out of range: "
                f"{self.capacity}, {self.demo_ratio}"
            )


@dataclass
class OffPolicyTrainConfig(BudgetedTrainConfig):
    env_steps: int = field(
        default=100_000, metadata=_h("env transitions to collect in total (all envs)")
    )
    warmup_steps: int = field(
        default=5_000,
        metadata=_h(
            "transitions of uniform random actions before the policy acts and updates start"
        ),
    )
    learning_starts: int = field(
        default=1_000,
        metadata=_h(
            "no update before the replay holds this many online transitions (demos count too)"
        ),
    )
    demos: str | None = field(
        default=None,
        metadata=_h("episode store of demonstrations (rlinf collect) for the replay's demo source"),
    )
    store_online: bool = field(
        default=True,
        metadata=_h(
            "write every finished online episode to <out_dir>/episodes (needed to resume with its "
            "replay)"
        ),
    )
    episode_store: str | None = field(
        default=None, metadata=_h("episode store of online transitions; null = <out_dir>/episodes")
    )
    steps_per_round: int = field(
        default=1, metadata=_h("vector-env steps between two bursts of updates (fused loop)")
    )
    publish_every: int = field(
        default=50, metadata=_h("updates between two weight publications to env workers")
    )
    log_every: int = field(default=2_000, metadata=_h("env transitions between two metrics rows"))
    checkpoint_every: int = field(
        default=0, metadata=_h("env transitions between checkpoints (0 = only at the end)")
    )
    queue_episodes: int = field(
        default=8,
        metadata=_h(
            "distributed: episodes an env worker may have in flight before it waits for the learner"
        ),
    )
    out_dir: str = field(
        default="runs/offpolicy",
        metadata=_h("run directory: checkpoints/, episodes/, tb/, metrics.json, curves.png"),
    )
    resume: str | None = field(
        default=None,
        metadata=_h(
            "checkpoint (or run dir) to resume from; the replay is refilled from the episode store"
        ),
    )
    tensorboard: bool = field(
        default=True, metadata=_h("write TensorBoard scalars under <out_dir>/tb")
    )

    def validate(self) -> None:
        super().validate()
        for key in ("env_steps", "warmup_steps", "learning_starts", "checkpoint_every"):
            if getattr(self, key) < 0:
                raise ConfigError(f"key 'train.{key}' must be >= 0, got {getattr(self, key)}")
        for key in ("steps_per_round", "publish_every", "log_every", "queue_episodes"):
            if getattr(self, key) < 1:
                raise ConfigError(f"key 'train.{key}' must be >= 1, got {getattr(self, key)}")


@dataclass
class OffPolicyConfig(EnvRunConfig):
    """The off-policy runner (``runner: offpolicy``): SAC / RLPD / CrossQ from a replay."""

    runner: str = field(default="offpolicy", metadata=_h("runner registry name"))
    name: str = field(default="offpolicy", metadata=_h("run name (logs)"))
    placement: dict[str, str | int] | str = field(
        default_factory=lambda: {"env,learner,replay": "0"},
        metadata=_h(
            "env, learner, replay -> slots; all on the same one process = the fused loop; or "
            "'auto': the placement the cost model predicts fastest (learner.scheduling). With "
            "ingest.enabled also server (optional): one policy server per slot, started by the "
            "run on that slot's node, e.g. server: 1-2@fleet:site"
        ),
    )
    env: EnvConfig = field(
        default_factory=lambda: EnvConfig(num_envs=8),
        metadata=_h("environment (as the embodied runner's)"),
    )
    model: OffPolicyModelConfig = field(
        default_factory=OffPolicyModelConfig, metadata=_h("actor, critics, pixel encoder")
    )
    algorithm: OffPolicyAlgorithmConfig = field(
        default_factory=OffPolicyAlgorithmConfig, metadata=_h("SAC / RLPD / CrossQ")
    )
    replay: ReplaySection = field(default_factory=ReplaySection, metadata=_h("replay buffer"))
    train: OffPolicyTrainConfig = field(
        default_factory=OffPolicyTrainConfig, metadata=_h("loop, data, checkpoints, logging")
    )
    ingest: IngestSection = field(
        default_factory=IngestSection,
        metadata=_h("robots stream transitions to the learner (remote topology)"),
    )
    push: PushSection = field(
        default_factory=PushSection, metadata=_h("push weights to a policy server every N updates")
    )
    servers: ServersSection = field(
        default_factory=ServersSection,
        metadata=_h("how the policy servers of placement 'server' serve (bind, port, sampling)"),
    )
    live: LiveSection = field(
        default_factory=LiveSection,
        metadata=_h("a local web page + console line of the robots learning (learner.live)"),
    )

    def validate(self) -> None:
        from learner.placement import check_placement_value, is_auto

        # 'auto' is only checked here; learner.scheduling.auto.plan resolves it after validation
        check_placement_value(self.placement)
        if not is_auto(self.placement):
            self._check_components()
        if (
            self.model.use_images
            and "rgb" not in self.env.obs_mode
            and "image" not in self.env.obs_mode
        ):
            raise ConfigError(
                "key 'model.use_images' needs an image env.obs_mode (rgb, state+rgb), got "
                f"{self.env.obs_mode!r}"
            )
        if self.algorithm.name == "crossq" and self.model.use_images:
            raise ConfigError(
                "key 'algorithm.name'=crossq runs on state observations only (its joint batch-norm "
                "pass concatenates state tensors); use sac or rlpd with model.use_images"
            )
        if self.algorithm.name == "rlpd" and not self.train.demos:
            raise ConfigError(
                "key 'train.demos' is required by algorithm.name=rlpd (RLPD samples half of each "
                "batch from prior data); record some with 'rlinf collect ENV --out DIR'"
            )
        if self.algorithm.bc_weight > 0 and not (self.train.demos or self.ingest.enabled):
            raise ConfigError(
                f"key 'algorithm.bc_weight'={self.algorithm.bc_weight} imitates prior actions, "
                "and this run has none: set train.demos (or stream a robot with a human's "
                "takeovers, ingest.enabled), or bc_weight: 0"
            )
        if self.ingest.enabled and self.cluster.address and not self.places_servers:
            raise ConfigError(
                "key 'ingest.enabled': the ingesting learner runs in the calling process (robots "
                "connect to it); drop cluster.address / --ray-address, or place the robots' "
                "policy servers (placement 'server'), which runs the learner where the placement "
                "puts it"
            )
        if self.push.targets and not self.ingest.enabled:
            raise ConfigError(
                "keys 'push.url' / 'push.urls' are for robots learning online (ingest.enabled: "
                "true); simulated runs publish weights to their env workers"
            )
        if self.live.enabled and not self.ingest.enabled:
            raise ConfigError(
                "key 'live.enabled' shows robots learning online: it needs ingest.enabled: true"
            )
        if self.places_servers:
            self.push.check_token()  # the placed servers take pushes with the same token

    @property
    def places_servers(self) -> bool:
        """The placement names ``server``: the run starts the robots' policy servers."""
        return not isinstance(self.placement, str) and SERVER in _names(self.placement)

    def _check_components(self) -> None:
        """Each of env, learner, replay placed once; ``server`` at most once and only where
        robots stream (a simulated run's env workers act with the published weights)."""
        names = _names(self.placement)
        known = [*COMPONENTS, *OPTIONAL]
        for name in names:
            if name not in known:
                raise ConfigError(
                    f"key 'placement': unknown component {name!r}{did_you_mean(name, known)} "
                    f"(components: {', '.join(COMPONENTS)}; optional: {', '.join(OPTIONAL)})"
                )
        required = [n for n in names if n in COMPONENTS]
        if sorted(required) != sorted(COMPONENTS) or names.count(SERVER) > 1:
            raise ConfigError(
                f"key 'placement' must place exactly {list(COMPONENTS)} once each (and "
                f"{SERVER!r} at most once), got {names}"
            )
        if SERVER in names and not self.ingest.enabled:
            raise ConfigError(
                f"key 'placement': {SERVER!r} places the policy servers robots act through, so it "
                "needs robots streaming to the learner (ingest.enabled: true); a simulated run's "
                "env workers act with the weights the learner publishes to them"
            )


def _names(placement: dict[str, str | int]) -> list[str]:
    """Every component a placement mapping names, in order (``"learner,replay"`` is two)."""
    return [n.strip() for key in placement for n in str(key).split(",")]
