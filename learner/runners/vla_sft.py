"""The VLA SFT stage (``runner: vla_sft``): supervised fine-tuning on demonstrations, before RL::

    rlinf collect franka_language/mix --obs-mode state+rgb --out runs/demos/lang ... (oracle demos)
    episode store --> (state, image, instruction, action chunk) batches --> model.sft_loss -->
    checkpoint
                                                                                    |
    PPO / GRPO (runner: embodied, train.init_from: <this out_dir>) <----------------+

The model is any registered model with ``sft_loss(obs, action_chunks)`` (``vla_tokens``: token
cross-entropy, ``vla_flow``: flow matching). Chunk targets are the next ``model.chunk`` demo
actions, the episode's last action repeated past its end. The checkpoint is the embodied
format, so ``rlinf eval`` / ``rlinf serve`` and ``train.init_from`` take it. One local process.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from learner.cluster import ClusterConfig

# imported before any env starts: it picks a headless MuJoCo GL default
from learner.eval.embodied import evaluate_config
from learner.offline.supervised import SFTLearner
from learner.runners.budget import Budget
from learner.runners.config import ModelConfig, PolicyRunConfig
from learner.runners.fit import Every, Rows, fit
from learner.runners.registry import RUNNERS, RunnerSpec
from learner.sections import BudgetedTrainConfig, EnvConfig
from learner.sections import h as _h
from rlinf_contracts.config import ConfigError
from rlinf_data.demos import open_demos

log = logging.getLogger(__name__)


@dataclass
class SFTDataConfig:
    demos: str = field(
        default="",
        metadata=_h(
            "episode store of demonstrations (rlinf collect ... --obs-mode state+rgb --out DIR)"
        ),
    )
    steps: int = field(default=2000, metadata=_h("gradient steps"))
    batch_size: int = field(default=128, metadata=_h("samples per step"))
    lr: float = field(default=1e-3, metadata=_h("Adam learning rate"))
    max_episodes: int | None = field(
        default=None, metadata=_h("use only the first N episodes of the store")
    )

    def validate(self) -> None:
        if not self.demos:
            raise ConfigError(
                "key 'sft.demos' is required: the episode store to learn from (record one with "
                "'rlinf collect franka_language/mix --obs-mode state+rgb --out DIR')"
            )
        if self.steps < 1 or self.batch_size < 1 or self.lr <= 0:
            raise ConfigError("keys 'sft.steps' >= 1, 'sft.batch_size' >= 1 and 'sft.lr' > 0")


@dataclass
class SFTTrainConfig(BudgetedTrainConfig):
    out_dir: str = field(
        default="runs/vla_sft", metadata=_h("run directory: checkpoints/, metrics.json, curves.png")
    )
    log_every: int = field(default=100, metadata=_h("steps between two metrics rows"))
    time_budget_s: float | None = field(
        default=None, metadata=_h("wall-clock bound (s) on the final eval's deadline")
    )


@dataclass
class VLASFTConfig(PolicyRunConfig):
    """The VLA SFT stage (``runner: vla_sft``): supervised action chunks, one local process."""

    runner: str = field(default="vla_sft", metadata=_h("runner registry name"))
    name: str = field(default="vla_sft", metadata=_h("run name (logs)"))
    cluster: ClusterConfig = field(
        default_factory=ClusterConfig, metadata=_h("Ray cluster (unused: one local process)")
    )
    placement: dict[str, str | int] = field(
        default_factory=lambda: {"learner": "0"}, metadata=_h("learner -> slot (one process)")
    )
    env: EnvConfig = field(
        default_factory=lambda: EnvConfig(
            name="franka_language/mix", num_envs=8, obs_mode="state+rgb"
        ),
        metadata=_h("the env of the demos (held-out eval; its spec builds the model)"),
    )
    model: ModelConfig = field(
        default_factory=lambda: ModelConfig(name="vla_tokens", hidden=[256, 256]),
        metadata=_h("the VLA"),
    )
    sft: SFTDataConfig = field(default_factory=SFTDataConfig, metadata=_h("data and optimisation"))
    train: SFTTrainConfig = field(default_factory=SFTTrainConfig, metadata=_h("outputs"))

    def validate(self) -> None:
        self.sft.validate()


@dataclass
class DemoSet:
    """Every demo step as arrays: states ``[N, D]``, images ``[N, H, W, 3]``, chunk targets
    ``[N, chunk, A]``, instructions ``[N]``."""

    states: np.ndarray
    images: np.ndarray
    chunks: np.ndarray
    instructions: np.ndarray

    def batch(self, idx: np.ndarray, camera: str) -> tuple[dict[str, Any], torch.Tensor]:
        obs = {
            "state": torch.as_tensor(self.states[idx]),
            "images": {camera: torch.as_tensor(self.images[idx])},
            "instruction": self.instructions[idx].tolist(),
        }
        return obs, torch.as_tensor(self.chunks[idx])


def load_demos(path: str, camera: str, chunk: int, max_episodes: int | None = None) -> DemoSet:
    """The demos (:mod:`rlinf_data.demos`) as chunk targets; an error names a missing camera
    or instruction."""
    key = f"images/{camera}"
    demos = open_demos(
        path,
        key="sft.demos",
        need=[key, "instruction"],
        hint="record them with --obs-mode state+rgb, the env's camera and one instruction each",
    )
    states, images, chunks, texts = [], [], [], []
    for ep in demos.episodes(max_episodes):
        act = ep.steps["action"].astype(np.float32)
        idx = np.minimum(np.arange(len(act))[:, None] + np.arange(chunk)[None], len(act) - 1)
        states.append(ep.steps["state"].astype(np.float32))
        images.append(ep.steps[key])
        chunks.append(act[idx])
        texts += [ep.info.instruction] * len(act)
    return DemoSet(
        np.concatenate(states),
        np.concatenate(images),
        np.concatenate(chunks),
        np.array(texts, dtype=object),
    )


def _train(cfg: VLASFTConfig) -> dict[str, Any]:
    from learner.actor.trainer import make_policy, policy_spec
    from learner.checkpoint import save_checkpoint
    from learner.metrics import checkpoint_dir
    from learner.rollout.envs import build_env
    from learner.runners.offpolicy import write_outputs
    from rlinf_contracts.config import to_dict

    budget, rows = Budget.start(cfg.train.time_budget_s), Rows()
    env = build_env(cfg.env.name, 1, **cfg.env.factory_kwargs())
    policy = make_policy(cfg, policy_spec(cfg, env.spec))
    env.close()
    if not hasattr(policy, "sft_loss"):
        raise ConfigError(
            f"key 'model.name'={cfg.model.name!r} has no sft_loss; use vla_tokens or vla_flow"
        )
    camera = next(iter(policy.spec.cameras))
    data = load_demos(cfg.sft.demos, camera, cfg.model.chunk, cfg.sft.max_episodes)
    policy.update_normalizer(torch.as_tensor(data.states), data.instructions.tolist())
    learner, rng = SFTLearner(policy, cfg.sft.lr), np.random.default_rng(cfg.seed)

    def draw() -> tuple[dict[str, Any], torch.Tensor]:
        return data.batch(rng.integers(len(data.states), size=cfg.sft.batch_size), camera)

    def log_step(step: int, metrics: dict[str, float]) -> None:
        log.info("sft step %d loss %.4f", step, metrics["sft_loss"])

    fit(
        learner,
        draw,
        cfg.sft.steps,
        [Every(cfg.train.log_every, rows), Every(cfg.train.log_every, log_step)],
    )
    history = rows.history
    policy.eval()
    path = save_checkpoint(
        checkpoint_dir(cfg.train.out_dir, cfg.sft.steps),
        policy,
        iteration=cfg.sft.steps,
        weight_version=0,
        config=to_dict(cfg),
        metrics=history[-1],
    )
    final: dict[str, Any] = {
        **history[-1],
        "checkpoint": str(path),
        "iterations": len(history),
        "demo_steps": len(data.states),
        "out_dir": cfg.train.out_dir,
        "in_process": True,
        "train_s": time.perf_counter() - rows.t0,
    }
    if cfg.train.final_eval:
        final["eval"] = evaluate_config(
            policy,
            cfg,
            cfg.eval.episodes,
            seed=0,
            deadline=budget.deadline,
            progress=cfg.train.progress,
        )
    final["elapsed_s"] = budget.elapsed()
    return write_outputs(cfg, "vla_sft", history, final)


def run(cfg: VLASFTConfig, cluster: Any) -> dict[str, Any]:
    """SFT in one local process pinned like a fused worker (its slot's cores and torch threads)."""
    from learner.runners.fused import run_placed

    return run_placed(_train, cfg, cluster, f"{cfg.name}-sft")


RUNNERS.add(
    "vla_sft", RunnerSpec(config_cls=VLASFTConfig, run=run, in_process=lambda cfg, slots: True)
)
__all__ = ["run", "VLASFTConfig", "load_demos"]
