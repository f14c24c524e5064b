"""Per-step records -> a batch-major trajectory the actor trains on.

One :class:`TrajectoryBuilder` per env stream (an env worker's pipeline stage). The rollout
side calls ``add_step`` with what the policy did and ``add_outcome`` with what the env
answered, then ``finish`` with ``V(s_T)``. Arrays are ``[B, T, ...]`` (B sub-envs, T policy
steps); with action chunks one policy step executes a whole chunk and its reward is the
chunk's summed reward.

Two episode modes:
- ``continuous`` (PPO): envs auto-reset and keep running across iterations; every step is
  valid, ``dones`` marks episode ends, truncation (time limit) is bootstrapped by adding
  ``gamma * V(final_obs)`` to the last reward, as if the episode went on.
- ``single`` (GRPO): each row runs exactly one episode from a reset; steps after its end are
  masked out and ``scores`` holds the episode's return discounted by ``gamma`` per policy step
  (``gamma`` 1: the plain return; below 1 an outcome estimator also prefers the faster success).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlinf_contracts.env import Observation


@dataclass
class StepOutcome:
    """What an env step reports back to the rollout side (only the parts the learner uses)."""

    reward: np.ndarray  # [B] summed over the executed chunk
    terminated: np.ndarray  # [B] bool
    truncated: np.ndarray  # [B] bool
    success: np.ndarray  # [B] bool
    episode_return: np.ndarray  # [B], valid where done
    episode_length: np.ndarray  # [B], valid where done
    final_obs: Observation | None  # rows of ``truncated`` only (for value bootstrap), else None

    @classmethod
    def from_step(
        cls, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, info: dict[str, Any]
    ) -> StepOutcome:
        reward = np.asarray(reward, dtype=np.float32)
        if reward.ndim == 2:
            reward = reward.sum(axis=1)
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        trunc_only = truncated & ~terminated
        final = None
        if trunc_only.any() and "final_observation" in info:
            rows, fo = np.flatnonzero(trunc_only), info["final_observation"]
            final = {
                "state": fo["state"][rows],
                "images": {k: v[rows] for k, v in (fo.get("images") or {}).items()},
            }
            if fo.get("instruction"):  # language-conditioned envs: the critic reads it too
                final["instruction"] = [fo["instruction"][r] for r in rows.tolist()]
        n = reward.shape[0]
        return cls(
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            success=np.asarray(info.get("success", np.zeros(n, bool)), bool),
            episode_return=np.asarray(info.get("episode_return", np.zeros(n)), np.float32),
            episode_length=np.asarray(info.get("episode_length", np.zeros(n)), np.int64),
            final_obs=final,
        )

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated


@dataclass
class EpisodeStats:
    """Finished episodes of one rollout (lists, so streams and ranks concatenate cheaply)."""

    successes: list[bool] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    revisited: int = (
        0  # episodes that re-ran a start state whose group all failed (algorithm.revisit_share)
    )

    def extend(self, other: EpisodeStats) -> None:
        self.successes += other.successes
        self.returns += other.returns
        self.lengths += other.lengths
        self.revisited += other.revisited

    def summary(self) -> dict[str, float]:
        if not self.successes:
            return {"episodes": 0.0}
        out = {
            "episodes": float(len(self.successes)),
            "success_rate": float(np.mean(self.successes)),
            "episode_return": float(np.mean(self.returns)),
            "episode_length": float(np.mean(self.lengths)),
        }
        if self.revisited:
            out["revisited_episodes"] = float(self.revisited)
        return out


@dataclass
class Trajectory:
    """Batch-major rollout data: everything ``[B, T, ...]`` except ``bootstrap_value [B]``."""

    obs: dict[
        str, Any
    ]  # state [B, T, D], images {cam: [B, T, H, W, 3]}, maybe instruction [B, T] (str objects)
    actions: np.ndarray  # [B, T, chunk, A]
    logp: np.ndarray  # [B, T]
    values: np.ndarray  # [B, T]
    rewards: np.ndarray  # [B, T]
    dones: np.ndarray  # [B, T] float, 1 where an episode ended at t
    mask: np.ndarray  # [B, T] float, 1 at valid steps
    bootstrap_value: np.ndarray  # [B]
    scores: np.ndarray  # [B] discounted return of the row's (first) episode, for outcome advantages
    stats: EpisodeStats = field(default_factory=EpisodeStats)

    @property
    def num_steps(self) -> int:
        return int(self.mask.sum())


def split_rows(traj: Trajectory, parts: int, group_size: int = 1) -> list[Trajectory]:
    """Split along the batch axis into ``parts`` near-equal shards of whole groups.

    Used to give every actor rank a share of every stream; GRPO groups (``group_size``
    contiguous rows) are never cut. Episode stats stay with the first shard only.
    """
    groups = traj.mask.shape[0] // group_size
    if groups < parts:
        raise ValueError(
            f"cannot split {groups} group(s) of {group_size} env(s) over {parts} actor processes; "
            "raise env.num_envs or give 'actor' fewer processes in 'placement'"
        )
    bounds = np.cumsum(
        [0] + [len(c) * group_size for c in np.array_split(np.arange(groups), parts)]
    )
    out = []
    for k in range(parts):
        sl = slice(int(bounds[k]), int(bounds[k + 1]))
        obs = {
            "state": traj.obs["state"][sl],
            "images": {c: v[sl] for c, v in traj.obs.get("images", {}).items()},
        }
        if traj.obs.get("instruction") is not None:
            obs["instruction"] = traj.obs["instruction"][sl]
        out.append(
            Trajectory(
                obs=obs,
                actions=traj.actions[sl],
                logp=traj.logp[sl],
                values=traj.values[sl],
                rewards=traj.rewards[sl],
                dones=traj.dones[sl],
                mask=traj.mask[sl],
                bootstrap_value=traj.bootstrap_value[sl],
                scores=traj.scores[sl],
                stats=traj.stats if k == 0 else EpisodeStats(),
            )
        )
    return out


def collate(parts: list[Trajectory]) -> Trajectory:
    """Concatenate trajectories of equal T along the batch axis (stream order kept)."""
    cat = lambda xs: np.concatenate(xs, axis=0)  # noqa: E731
    stats = EpisodeStats()
    for p in parts:
        stats.extend(p.stats)
    cams = parts[0].obs.get("images", {}).keys()
    obs = {
        "state": cat([p.obs["state"] for p in parts]),
        "images": {c: cat([p.obs["images"][c] for p in parts]) for c in cams},
    }
    if parts[0].obs.get("instruction") is not None:
        obs["instruction"] = cat([p.obs["instruction"] for p in parts])
    return Trajectory(
        obs=obs,
        actions=cat([p.actions for p in parts]),
        logp=cat([p.logp for p in parts]),
        values=cat([p.values for p in parts]),
        rewards=cat([p.rewards for p in parts]),
        dones=cat([p.dones for p in parts]),
        mask=cat([p.mask for p in parts]),
        bootstrap_value=cat([p.bootstrap_value for p in parts]),
        scores=cat([p.scores for p in parts]),
        stats=stats,
    )


class TrajectoryBuilder:
    """Accumulates one stream's steps; see the module docstring for the episode modes."""

    def __init__(
        self,
        num_envs: int,
        gamma: float,
        single_episode: bool = False,
        keep_instruction: bool = False,
    ) -> None:
        self.n, self.gamma, self.single = num_envs, gamma, single_episode
        self.keep_instruction = (
            keep_instruction  # language-conditioned policies re-read it in training
        )
        self.obs: list[Observation] = []
        self.actions: list[np.ndarray] = []
        self.logp: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []
        self.dones: list[np.ndarray] = []
        self.mask: list[np.ndarray] = []
        self.alive = np.ones(num_envs, bool)  # single mode: row still in its first episode
        self.scores = np.zeros(num_envs, np.float32)
        self._discount = np.ones(
            num_envs, np.float32
        )  # gamma ** (policy steps into the first episode)
        self.stats = EpisodeStats()

    @property
    def steps(self) -> int:
        return len(self.actions)

    def add_step(
        self,
        obs: Observation,
        actions: np.ndarray,
        logp: np.ndarray,
        values: np.ndarray,
        credit: np.ndarray | None = None,
    ) -> None:
        """``credit`` [B] (0/1) masks steps out of the loss on top of the episode mask
        (a group's shared prefix, :mod:`learner.rollout.branching`)."""
        self.obs.append(
            {
                "state": obs["state"],
                "images": dict(obs.get("images") or {}),
                "instruction": list(obs.get("instruction") or []) if self.keep_instruction else [],
            }
        )
        self.actions.append(np.asarray(actions, np.float32))
        self.logp.append(np.asarray(logp, np.float32))
        self.values.append(np.asarray(values, np.float32))
        mask = self.alive.astype(np.float32) if self.single else np.ones(self.n, np.float32)
        self.mask.append(mask if credit is None else mask * np.asarray(credit, np.float32))

    def add_outcome(self, out: StepOutcome, final_values: np.ndarray | None = None) -> None:
        """Record the env's answer to the last ``add_step``; ``final_values`` = V(out.final_obs)."""
        reward = out.reward.astype(np.float32).copy()
        if final_values is not None and out.final_obs is not None:
            rows = np.flatnonzero(out.truncated & ~out.terminated)
            reward[rows] += self.gamma * np.asarray(final_values, np.float32)
        counted = self.alive if self.single else np.ones(self.n, bool)
        self.scores += np.where(self.alive, self._discount * out.reward, 0.0).astype(np.float32)
        self._discount *= np.float32(self.gamma)
        self.rewards.append(reward)
        self.dones.append(out.done.astype(np.float32))
        for i in np.flatnonzero(out.done & counted):
            self.stats.successes.append(bool(out.success[i]))
            self.stats.returns.append(float(out.episode_return[i]))
            self.stats.lengths.append(int(out.episode_length[i]))
        if self.single:
            self.alive &= ~out.done

    def finish(self, bootstrap_value: np.ndarray) -> Trajectory:
        if len(self.rewards) != len(self.actions):
            raise RuntimeError(
                f"trajectory has {len(self.actions)} steps but {len(self.rewards)} outcomes"
            )
        stack = lambda xs: np.stack(xs, axis=1)  # noqa: E731  [T][B...] -> [B, T, ...]
        cams = self.obs[0]["images"].keys() if self.obs else []
        obs = {
            "state": stack([o["state"] for o in self.obs]),
            "images": {c: stack([o["images"][c] for o in self.obs]) for c in cams},
        }
        if (
            self.keep_instruction
            and self.obs
            and all(len(o["instruction"]) == self.n for o in self.obs)
        ):
            instr = np.empty((self.n, len(self.obs)), dtype=object)  # [B, T] strings
            for t, o in enumerate(self.obs):
                instr[:, t] = o["instruction"]
            obs["instruction"] = instr
        boot = np.asarray(bootstrap_value, np.float32)
        if self.single:
            boot = np.where(self.alive, boot, 0.0).astype(np.float32)
        return Trajectory(
            obs=obs,
            actions=stack(self.actions),
            logp=stack(self.logp),
            values=stack(self.values),
            rewards=stack(self.rewards),
            dones=stack(self.dones),
            mask=stack(self.mask),
            bootstrap_value=boot,
            scores=self.scores.copy(),
            stats=self.stats,
        )
