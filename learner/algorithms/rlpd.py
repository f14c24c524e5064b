"""RLPD (Ball et al. 2023): SAC from prior data + symmetric sampling, LN ensemble, high UTD.

Three changes on top of SAC, each cheap and each necessary:
1. *Symmetric sampling*: every batch is half offline demonstrations, half online replay,
   so the demos keep shaping the critic however large the online buffer grows.
2. *LayerNorm critic ensemble* (10 critics) with the target minimum over a *random 2*:
   LayerNorm bounds Q extrapolation on unseen actions; the random-subset min is
   pessimistic enough without the over-pessimism of a min over 10.
3. *High update-to-data ratio* (UTD ~20 critic steps per env step; SERL uses a
   critic:actor ratio of 4:1), made stable by 1 and 2.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from learner.algorithms.critics import CriticEnsemble
from learner.algorithms.sac import OFF_POLICY_LEARNERS, Batch, SACConfig, SACLearner


def symmetric_batch(
    offline: Batch,
    online: Batch,
    batch_size: int,
    offline_fraction: float = 0.5,
    generator: torch.Generator | None = None,
) -> Batch:
    """Sample ``round(batch_size * offline_fraction)`` rows from ``offline`` and the rest
    from ``online`` (uniformly, with replacement) and concatenate them key by key.

    An empty source gives its share to the other one (e.g. before any online data).
    """
    n_off_data = len(next(iter(offline.values()))) if offline else 0
    n_on_data = len(next(iter(online.values()))) if online else 0
    if n_off_data == 0 and n_on_data == 0:
        raise ValueError("symmetric_batch: both offline and online data are empty")
    n_off = round(batch_size * offline_fraction) if n_on_data else batch_size
    n_off = n_off if n_off_data else 0
    parts: list[Batch] = []
    plan = ((offline, n_off_data, n_off), (online, n_on_data, batch_size - n_off))
    for source, n_rows, count in plan:
        if count:
            idx = torch.randint(n_rows, (count,), generator=generator)
            parts.append({k: v[idx.to(v.device)] for k, v in source.items()})
    keys = parts[0].keys()
    if len(parts) == 2 and parts[1].keys() != keys:
        raise ValueError(
            f"offline keys {sorted(keys)} and online keys {sorted(parts[1].keys())} differ"
        )
    return {k: torch.cat([p[k] for p in parts], dim=0) for k in keys}


@dataclass
class RLPDConfig:
    """RLPD defaults (paper); ``sac`` holds the underlying SAC settings."""

    n_critics: int = 10
    critic_subset: int = 2
    utd_ratio: int = 20  # critic updates per actor update / env step
    offline_fraction: float = 0.5
    layer_norm: bool = True
    hidden: tuple[int, ...] = (256, 256)
    entropy_scale: float = 0.5  # target entropy -0.5 |A| (reference code)
    sac: SACConfig | None = None


@OFF_POLICY_LEARNERS.register("rlpd")
def make_rlpd_learner(
    actor: nn.Module,
    obs_dim: int,
    action_dim: int,
    cfg: RLPDConfig | None = None,
) -> SACLearner:
    """SAC learner with RLPD's LayerNorm ensemble (per-member norm parameters), random-2
    target minimum, mean-Q actor and target entropy ``-entropy_scale |A|`` (an explicit
    ``sac.target_entropy`` wins)."""
    cfg = cfg or RLPDConfig()
    sac_cfg = copy.copy(cfg.sac) if cfg.sac is not None else SACConfig()
    sac_cfg.critic_subset = cfg.critic_subset
    sac_cfg.actor_q_reduce = "mean"
    sac_cfg.entropy_scale = cfg.entropy_scale
    critic = CriticEnsemble(obs_dim, action_dim, cfg.n_critics, cfg.hidden, cfg.layer_norm)
    return SACLearner(actor, critic, action_dim, sac_cfg)


def rlpd_update(
    learner: SACLearner, sample_batch: Callable[[], Batch], utd_ratio: int
) -> dict[str, float]:
    """``utd_ratio`` critic steps on fresh batches, then one actor / temperature step.

    ``sample_batch`` is typically ``lambda: symmetric_batch(demos, replay, 256)``.
    """
    if utd_ratio < 1:
        raise ValueError(f"utd_ratio must be >= 1, got {utd_ratio}")
    metrics: dict[str, float] = {}
    batch: Batch = {}
    for _ in range(utd_ratio):
        batch = sample_batch()
        metrics = learner.update_critic(batch)
    return {**metrics, **learner.update_actor(batch)}
