"""One training rank's state: policy, PPO learner, gradient sync, checkpoint I/O.

Shared by the fused worker (env + rollout + actor in one process) and the actor worker, via
:class:`TrainerHost`, the mixin that exposes it as Ray-callable methods.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from learner.actor.ddp import GradSync, free_address
from learner.actor.ppo import PPOLearner, names_under
from learner.checkpoint import load_checkpoint, save_checkpoint
from learner.models import Policy, PolicySpec, build_policy
from learner.roles import WeightPublisher
from learner.rollout.collect import derive_seed, seed_everything
from learner.rollout.trajectory import Trajectory
from learner.runners.config import EmbodiedConfig
from rlinf_contracts.config import ConfigError, to_dict
from rlinf_contracts.env import EnvSpec

log = logging.getLogger(__name__)


def policy_spec(cfg: EmbodiedConfig, env_spec: EnvSpec) -> PolicySpec:
    """The policy layout for an env: cameras only when the model consumes images. The env's
    robot spec rides along (as the policy consumes it), so the checkpoint can be served to a robot."""
    from learner.models import IMAGE_MODELS, INSTRUCTION_MODELS

    cams = dict(env_spec.cameras) if cfg.model.name in IMAGE_MODELS else {}
    robot = (
        None if env_spec.robot is None else env_spec.robot.with_policy(cfg.model.chunk, tuple(cams))
    )
    return PolicySpec(
        state_dim=env_spec.state_dim,
        action_dim=env_spec.action_dim,
        chunk=cfg.model.chunk,
        cameras=cams,
        uses_instruction=cfg.model.name in INSTRUCTION_MODELS,
        robot=robot,
    )


def make_policy(cfg: EmbodiedConfig, spec: PolicySpec) -> Policy:
    """Same seed everywhere, so every rank and every rollout worker starts from equal weights."""
    torch.manual_seed(derive_seed(cfg.seed, "init"))
    try:
        return build_policy(cfg.model.name, spec, **cfg.model.build_kwargs())
    except (
        ValueError
    ) as e:  # a model's own checks of its kwargs against the env (they name the key)
        raise ConfigError(f"model {cfg.model.name!r}: {e}") from e


def cpu_state_dict(policy: Policy) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in policy.state_dict().items()}


class Trainer:
    def __init__(self, cfg: EmbodiedConfig, spec: PolicySpec, rank: int, world_size: int) -> None:
        self.cfg, self.rank = cfg, rank
        self.policy = make_policy(cfg, spec)
        self.sync = GradSync(rank, world_size)
        self.learner = PPOLearner(
            self.policy, cfg.algorithm, cfg.actor, cfg.train.iterations, self.sync
        )

    def train(self, traj: Trajectory, iteration: int) -> dict[str, float]:
        gen = seed_everything(derive_seed(self.cfg.seed, "actor", self.rank, iteration))
        return self.learner.update(traj, iteration, gen)


class TrainerHost(WeightPublisher):
    """Mixin for workers that own ``self.trainer``: the actor role (publish / save / load) plus
    the data-parallel rendezvous. ``self.store`` is the run's weight store on rank 0, else None."""

    trainer: Trainer
    store: Any

    def dist_address(self) -> str:
        return free_address()

    def init_dist(self, address: str) -> None:
        self.trainer.sync.init(address)

    def publish_state(self) -> dict[str, torch.Tensor]:
        return cpu_state_dict(self.trainer.policy)

    def save(self, path: str, iteration: int, metrics: dict[str, float]) -> str:
        """Rank 0 writes a checkpoint (ranks hold identical weights)."""
        from learner.checkpoint import rng_state

        save_checkpoint(
            path,
            self.trainer.policy,
            iteration=iteration,
            weight_version=self.version,
            optimizer=self.trainer.learner.optimizer,
            config=to_dict(self.trainer.cfg),
            metrics=metrics,
            rng=rng_state(),
        )
        return path

    def load(self, path: str) -> dict[str, Any]:
        """Restore model and optimiser; returns the checkpoint meta (iteration, version...)."""
        ckpt = load_checkpoint(path)
        self.trainer.policy.load_state_dict(ckpt.model_state)
        if ckpt.optimizer_state is not None:
            self.trainer.learner.optimizer.load_state_dict(ckpt.optimizer_state)
        self.version = ckpt.weight_version
        self.version_base = max(
            0, ckpt.weight_version - 1 - (self.store.version() if self.store is not None else 0)
        )
        return {
            k: v for k, v in ckpt.meta.items() if k in ("iteration", "weight_version", "metrics")
        }

    def init_from(self, path: str) -> str:
        """Start from another run's weights (``train.init_from``: e.g. SFT before RL); the
        optimiser, iteration and weight version start fresh. Errors name both layouts.

        ``train.init_skip`` prefixes keep this run's initialisation: what a stage decides for
        itself rather than inherits (the flow head's RL exploration noise, which SFT never trains)."""
        ckpt = load_checkpoint(path)
        state = dict(ckpt.model_state)
        skip = list(self.trainer.cfg.train.init_skip)
        if skip:
            own = self.trainer.policy.state_dict()
            kept = names_under(list(own), skip, "train.init_skip", "tensor")
            state.update({k: own[k] for k in kept})
            log.info(
                "train.init_skip: %d tensor(s) keep this config's initialisation: %s",
                len(kept),
                kept[:8],
            )
        try:
            self.trainer.policy.load_state_dict(state)
        except RuntimeError as e:
            raise ValueError(
                f"train.init_from={path!r} does not fit model.name={self.trainer.cfg.model.name!r} "
                f"with this env: {str(e).splitlines()[0]}"
            ) from None
        return path

    def param_vector(self) -> torch.Tensor:
        """All trainable parameters, flattened (tests compare it across iterations / ranks)."""
        return torch.cat([p.detach().reshape(-1) for p in self.trainer.policy.parameters()]).clone()
