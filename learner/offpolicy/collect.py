"""Env side of an off-policy run: step a vector env with the current actor, cut finished episodes.

One :class:`Collector` serves both topologies: the fused loop calls :meth:`Collector.step` between
update bursts (and adds each step to the replay at once), an env worker calls it in its own
process and ships the finished :class:`~rlinf_contracts.episode.Episode` records to the learner.
Either way every finished episode is a complete schema record (with the final observation, so
a truncated episode bootstraps), which is what the episode store keeps and a restart replays.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from learner.models.offpolicy import SquashedGaussianPolicy
from learner.offpolicy.batches import obs_tensors
from rlinf_contracts.env import VectorEnv
from rlinf_contracts.episode import Episode, EpisodeInfo, StepLayout


@dataclass
class StepBatch:
    """One vector-env step: what the replay's ``add`` takes, plus the episodes it finished."""

    obs: dict[str, Any]
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    next_obs: dict[str, Any]  # final observations substituted where an episode ended
    finished: list[Episode] = field(default_factory=list)


def layout_of(spec: Any) -> StepLayout:
    return StepLayout(
        spec.state_dim, spec.action_dim, {k: tuple(v) for k, v in spec.cameras.items()}
    )


def merge_final(
    next_obs: dict[str, Any], final: dict[str, Any] | None, done: np.ndarray
) -> dict[str, Any]:
    """``next_obs`` with the rows of ended episodes replaced by ``info["final_observation"]``."""
    if final is None or not done.any():
        return {"state": next_obs["state"], "images": dict(next_obs.get("images") or {})}
    pick = lambda new, fin: np.where(done.reshape((-1,) + (1,) * (new.ndim - 1)), fin, new)  # noqa: E731
    return {
        "state": pick(next_obs["state"], final["state"]),
        "images": {
            c: pick(v, final["images"][c]) for c, v in (next_obs.get("images") or {}).items()
        },
    }


class EpisodeRecorder:
    """Per env row, the steps of its running episode; a finished one becomes an :class:`Episode`."""

    def __init__(self, spec: Any, task: str, source: str = "online") -> None:
        self.layout, self.task, self.source = layout_of(spec), task, source
        self.robot = spec.robot.to_dict() if getattr(spec, "robot", None) is not None else None
        self.control_hz = float(getattr(spec, "control_hz", 10.0))
        self.rows: list[list[dict[str, np.ndarray]]] = [[] for _ in range(spec.num_envs)]

    def add(self, b: StepBatch, success: np.ndarray, version: int) -> list[Episode]:
        done = b.terminated | b.truncated
        out = []
        for i in range(len(b.action)):
            step = {
                "state": np.array(b.obs["state"][i]),
                "action": b.action[i],
                "reward": np.float32(b.reward[i]),
                "terminated": bool(b.terminated[i]),
                "truncated": bool(b.truncated[i]),
                "intervention": False,
                "policy_version": np.int64(version),
                "timestamp": np.float64(time.time()),
            }
            step.update(
                {f"images/{c}": np.array(b.obs["images"][c][i]) for c in self.layout.cameras}
            )
            self.rows[i].append(step)
            if done[i]:
                out.append(self._episode(i, b.next_obs, bool(success[i])))
        return out

    def _episode(self, i: int, next_obs: dict[str, Any], success: bool) -> Episode:
        steps = self.rows[i]
        self.rows[i] = []
        fields = self.layout.fields()
        arrays = {k: np.stack([s[k] for s in steps]).astype(fields[k][0]) for k in fields}
        final = {"state": np.asarray(next_obs["state"][i], np.float32)}
        final.update(
            {f"images/{c}": np.array(next_obs["images"][c][i]) for c in self.layout.cameras}
        )
        status = (
            "truncated" if arrays["truncated"][-1] and not arrays["terminated"][-1] else "complete"
        )
        info = EpisodeInfo(
            task=self.task,
            layout=self.layout,
            robot=self.robot,
            control_hz=self.control_hz,
            source=self.source,
            success=success,
            status=status,
        )
        return Episode(info, arrays, final)


class Collector:
    """Steps ``env`` with ``policy`` (or uniform random actions during warm-up)."""

    def __init__(
        self, env: VectorEnv, policy: SquashedGaussianPolicy, task: str, seed: int
    ) -> None:
        self.env, self.policy = env, policy
        self.recorder = EpisodeRecorder(env.spec, task)
        self.rng = np.random.default_rng(seed)
        self.obs = env.reset(seed)
        self.version = 0
        self.step_s = 0.0  # mean seconds per vector step (acting + env), for the eval estimate

    @torch.no_grad()
    def act(self, random: bool) -> np.ndarray:
        n, a = self.env.num_envs, self.env.spec.action_dim
        if random:
            return self.rng.uniform(-1.0, 1.0, size=(n, a)).astype(np.float32)
        x = obs_tensors(self.obs, self.policy.encoder.cameras)
        action, _ = self.policy.distribution(self.policy.encoder(x)).sample()
        return action.numpy().astype(np.float32)

    def step(self, random: bool = False) -> StepBatch:
        t0 = time.perf_counter()
        action = self.act(random)
        nxt, reward, term, trunc, info = self.env.step(action)
        term, trunc = np.asarray(term, bool), np.asarray(trunc, bool)
        done = term | trunc
        b = StepBatch(
            self.obs,
            action,
            np.asarray(reward, np.float32),
            term,
            trunc,
            merge_final(nxt, info.get("final_observation"), done),
        )
        b.finished = self.recorder.add(
            b, np.asarray(info.get("success", np.zeros(len(done))), bool), self.version
        )
        self.obs = nxt
        dt = time.perf_counter() - t0
        self.step_s = dt if self.step_s == 0.0 else 0.99 * self.step_s + 0.01 * dt
        return b
