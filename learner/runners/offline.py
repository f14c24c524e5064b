"""The offline runner (``runner: offline``): BC, IQL and DAgger on an episode store::

    episode store --> dataset --> updates --> checkpoint --> held-out eval
                        ^                        |
                        +-- dagger: roll out, label with the sim oracle, aggregate --+

``algorithm.name: bc`` clones the demos, ``iql`` learns Q / V / actor from them without
querying unseen actions, ``dagger`` starts as BC and then runs ``algorithm.rounds`` rounds of
learner rollouts labelled by ``sim_bridges.mujoco_franka.oracle_action``. One local process,
state observations; the actor is the off-policy runner's (model ``sac``), so ``rlinf serve`` and
``rlinf eval`` take its checkpoints. Outputs as the other runners: ``checkpoints/``,
``metrics.json``, ``curves.png``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

# imported before any env starts: it picks a headless MuJoCo GL default
from learner.offline.config import OfflineConfig
from learner.offline.data import bc_buffer, check_layout, oracle_round, read_episodes, replay_of
from learner.offline.trainers import OFFLINE_LEARNERS, make_policy
from learner.offpolicy.batches import to_batch
from learner.offpolicy.nets import policy_spec
from learner.rollout.envs import build_env
from learner.runners.budget import Budget
from learner.runners.fit import Every, Rows, fit
from learner.runners.registry import RUNNERS, RunnerSpec

log = logging.getLogger(__name__)


def run(cfg: OfflineConfig, cluster: Any) -> dict[str, Any]:
    """Train per ``cfg`` in one local process pinned like a fused worker (its slot's cores and
    torch threads); returns the final metrics (incl. held-out eval)."""
    from learner.runners.fused import run_placed

    return run_placed(_train, cfg, cluster, f"{cfg.name}-offline")


def _train(cfg: OfflineConfig) -> dict[str, Any]:
    budget, rows = Budget.start(cfg.train.time_budget_s), Rows()
    env = build_env(cfg.env.name, cfg.env.num_envs, **cfg.env.factory_kwargs())
    episodes = read_episodes(cfg.data.demos)
    check_layout(episodes, env.spec, cfg.data.demos)
    policy = make_policy(cfg, policy_spec(env.spec, use_images=False))
    learner = OFFLINE_LEARNERS.get(cfg.algorithm.name)(cfg, policy)
    a, log_row = cfg.algorithm, Every(cfg.train.log_every, rows)
    if a.name == "iql":
        replay, rng = replay_of(episodes, a.gamma), np.random.default_rng(cfg.seed)

        def draw() -> Any:
            return to_batch(replay.sample(a.batch_size, rng), [])
    else:
        buf, gen = bc_buffer(episodes), torch.Generator().manual_seed(cfg.seed)

        def draw() -> Any:
            return buf.sample(a.batch_size, gen)

    for r in range(a.rounds + 1 if a.name == "dagger" else 1):
        if r:  # DAgger: roll the learner out, label its states with the oracle, aggregate
            beta = a.expert_beta * 0.5 ** (r - 1)
            rows.extra = oracle_round(env, policy, buf, a.round_env_steps, beta, gen)
            log.info(
                "dagger round %d: learner success %.2f, dataset %d",
                r,
                rows.extra["dagger/round_success"],
                len(buf),
            )
        fit(learner, draw, rows.updates + cfg.train.updates, [log_row], start=rows.updates)
    env.close()
    return _finish(cfg, learner.policy(), rows.history, budget, len(episodes))


def _finish(
    cfg: OfflineConfig, policy: Any, history: list[dict], budget: Budget, n_episodes: int
) -> dict[str, Any]:
    from learner.checkpoint import write_checkpoint
    from learner.eval.embodied import final_eval
    from learner.metrics import checkpoint_dir
    from learner.runners.offpolicy import write_outputs
    from rlinf_contracts.config import to_dict

    path = write_checkpoint(
        checkpoint_dir(cfg.train.out_dir, len(history)),
        policy.state_dict(),
        {"name": "sac", "kwargs": policy.model_kwargs},
        iteration=len(history),
        weight_version=0,
        spec=policy.spec.to_dict(),
        config=to_dict(cfg),
        metrics=history[-1] if history else {},
    )
    final: dict[str, Any] = {
        **(history[-1] if history else {}),
        "checkpoint": str(path),
        "iterations": len(history),
        "demo_episodes": n_episodes,
        "out_dir": cfg.train.out_dir,
        "in_process": True,
    }
    if cfg.train.final_eval:
        final["eval"] = final_eval(cfg, path, budget.deadline)
    final["elapsed_s"] = budget.elapsed()
    return write_outputs(cfg, "offline", history, final, cfg.train.tensorboard)


RUNNERS.add(
    "offline", RunnerSpec(config_cls=OfflineConfig, run=run, in_process=lambda cfg, slots: True)
)
__all__ = ["run", "OfflineConfig"]
