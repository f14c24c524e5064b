"""The embodied learner an :class:`~learner.actor.worker.ActorWorker` hosts: policy + PPO + I/O.

What the actor role needs beyond the :class:`~learner.algorithms.protocol.Algorithm` (which
:class:`~learner.actor.ppo.PPOLearner` is): how channel items become one batch
(:meth:`Trainer.collate`), the weights to publish, and the checkpoint format. The reasoning
runner's counterpart is :class:`learner.llm.learner.ReasoningLearner`; the worker is the same.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch.distributed.tensor import DTensor

from learner.actor.ddp import free_address
from learner.actor.ppo import PPOLearner, names_under
from learner.actor.strategies import make_strategy
from learner.checkpoint import load_checkpoint, save_checkpoint
from learner.models import Policy, PolicySpec, build_policy
from learner.rollout.collect import derive_seed
from learner.rollout.trajectory import Trajectory, collate
from learner.runners.config import EmbodiedConfig, PolicyRunConfig
from rlinf_contracts.config import ConfigError, to_dict
from rlinf_contracts.env import EnvSpec

log = logging.getLogger(__name__)


def policy_spec(cfg: PolicyRunConfig, env_spec: EnvSpec) -> PolicySpec:
    """The policy layout for an env: cameras only when the model consumes images. The env's
    robot spec rides along (as the policy consumes it), so the checkpoint can be served to a
    robot."""
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


def make_policy(cfg: PolicyRunConfig, spec: PolicySpec) -> Policy:
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


class Trainer(PPOLearner):
    """One training rank: the :class:`PPOLearner` of the run's config (its ``update`` is the PPO
    update itself), plus what the actor role asks of a hosted learner."""

    def __init__(
        self, cfg: EmbodiedConfig, spec: PolicySpec, rank: int = 0, world_size: int = 1
    ) -> None:
        super().__init__(
            make_policy(cfg, spec),
            cfg.algorithm,
            cfg.actor,
            cfg.train.iterations,
            make_strategy(cfg.actor.strategy, rank, world_size),
            seed=cfg.seed,
        )
        self.run_cfg, self.rank = cfg, rank

    # what the actor worker asks of a hosted learner
    def receive(self, item: tuple[int, Trajectory]) -> tuple[int, Trajectory]:
        """A ``(stream, rows)`` shard from a rollout worker: nothing to do on arrival."""
        return item

    def collate(
        self, items: list[tuple[int, Trajectory]] | list[Trajectory], version: int
    ) -> Trajectory:
        """This rank's rows of every stream, in stream order (or one in-process trajectory)."""
        if len(items) == 1 and isinstance(items[0], Trajectory):
            return items[0]
        return collate([t for _, t in sorted(items, key=lambda item: item[0])])  # type: ignore[misc]  # the one-trajectory case returned above

    @property
    def collective_state(self) -> bool:
        """Whether reading or saving the weights needs every rank (``actor.strategy: fsdp``)."""
        return bool(self.sync.collective_state) and self.sync.world_size > 1

    def publish_state(self) -> dict[str, torch.Tensor]:
        """CPU weights on rank 0 (a gather across ranks when sharded; empty on the others)."""
        return self.sync.full_state_dict(self.policy())

    def dist_address(self) -> str:
        return free_address()

    def init_dist(self, address: str) -> None:
        """Join the actor group, then let the strategy wrap the model; a sharding one replaced
        the parameters, so the optimiser is rebuilt on them."""
        self.sync.init(address)
        self.model = self.sync.wrap(self.model)
        if self.collective_state:
            self._make_optimizer()
            self._set_lr(self.iteration)

    def save(
        self, path: str, iteration: int, weight_version: int, metrics: dict[str, float]
    ) -> str:
        """Write a checkpoint: rank 0 the single-file layout (with the optimiser when it is
        whole); under a sharded strategy every rank then adds its model and optimiser shards
        (``sharded/``), which :meth:`load` prefers."""
        from learner.checkpoint import rng_state, write_checkpoint

        if not self.collective_state:
            if self.rank == 0:
                save_checkpoint(
                    path,
                    self.policy(),
                    iteration=iteration,
                    weight_version=weight_version,
                    optimizer=self.optimizer,
                    config=to_dict(self.run_cfg),
                    metrics=metrics,
                    rng=rng_state(),
                )
            return path
        policy = self.policy()
        full = self.sync.full_state_dict(policy)
        if self.rank == 0:
            write_checkpoint(
                path,
                full,
                {
                    "name": getattr(policy, "model_name", "mlp"),
                    "kwargs": getattr(policy, "model_kwargs", {}),
                },
                iteration=iteration,
                weight_version=weight_version,
                spec=policy.spec.to_dict(),
                config=to_dict(self.run_cfg),
                metrics=metrics,
                rng=rng_state(),
            )
        self.sync.barrier()  # the directory exists (and is final) before the shards go in
        self.sync.save_train_state(path, policy, self.optimizer)
        return path

    def load(self, path: str) -> dict[str, Any]:
        """Restore model, optimiser and iteration; returns the checkpoint meta (iteration...)."""
        ckpt = load_checkpoint(path)
        if not self.collective_state:
            self.load_state_dict(
                {
                    "model": ckpt.model_state,
                    "optimizer": ckpt.optimizer_state,
                    "iteration": int(ckpt.meta["iteration"]),
                }
            )
        elif not self.sync.load_train_state(ckpt.path, self.policy(), self.optimizer):
            self.sync.load_full_state_dict(self.policy(), ckpt.model_state)
            self.iteration = int(ckpt.meta["iteration"])
            log.warning(
                "%s holds no sharded optimiser state (a run with another actor.strategy): "
                "weights restored, Adam moments start fresh",
                ckpt.path,
            )
        else:
            self.iteration = int(ckpt.meta["iteration"])
        return {
            k: v for k, v in ckpt.meta.items() if k in ("iteration", "weight_version", "metrics")
        }

    def init_from(self, path: str) -> str:
        """Start from another run's weights (``train.init_from``: e.g. SFT before RL); the
        optimiser, iteration and weight version start fresh. Errors name both layouts.

        ``train.init_skip`` prefixes keep this run's initialisation: what a stage decides for
        itself rather than inherits (the flow head's RL exploration noise, which SFT never
        trains)."""
        ckpt = load_checkpoint(path)
        state = dict(ckpt.model_state)
        skip = list(self.run_cfg.train.init_skip)
        if skip and self.collective_state:  # the own values are shards: leave them where they are
            kept = names_under(list(self.policy().state_dict()), skip, "train.init_skip", "tensor")
            state = {k: v for k, v in state.items() if k not in kept}
        elif skip:
            own = self.policy().state_dict()
            kept = names_under(list(own), skip, "train.init_skip", "tensor")
            state.update({k: own[k] for k in kept})
            log.info(
                "train.init_skip: %d tensor(s) keep this config's initialisation: %s",
                len(kept),
                kept[:8],
            )
        try:
            self.sync.load_full_state_dict(self.policy(), state, strict=not skip)
        except (RuntimeError, KeyError) as e:
            raise ValueError(
                f"train.init_from={path!r} does not fit model.name={self.run_cfg.model.name!r} "
                f"with this env: {str(e).splitlines()[0]}"
            ) from None
        return path

    def param_vector(self) -> torch.Tensor:
        """All trainable parameters, flattened (tests compare it across iterations / ranks); a
        gather when sharded, so every rank calls it."""
        full = [
            p.detach().full_tensor() if isinstance(p, DTensor) else p.detach()  # type: ignore[attr-defined]  # the isinstance picks DTensor
            for p in self.policy().parameters()
        ]
        return torch.cat([p.reshape(-1) for p in full]).clone()
