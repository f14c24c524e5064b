"""Env construction for env workers: pipeline-stage shards, GRPO groups, deterministic seeds.

An env worker owns ``pipeline_stages`` vector envs (one per micro-batch). In GRPO mode each of
them is a :class:`GroupedVectorEnv`: ``group_size`` member envs reset from the *same* seed, so
rows ``j*G .. j*G+G-1`` start from identical states and form one group. With
``algorithm.revisit_share`` some groups start from a state whose whole group failed in an earlier
iteration (:mod:`learner.rollout.revisit`); :meth:`StageEnvs.step` keeps the per-row outcome that
decides it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from learner.rollout.revisit import FailedStates
from learner.rollout.trajectory import StepOutcome
from rlinf_contracts.env import EnvSpec, Observation, VectorEnv
from rlinf_contracts.env_registry import make_env

# env families the learner itself provides (registered on import)
_LEARNER_ENV_MODULES = {"toy": "learner.rollout.toy_env"}


def build_env(name: str, num_envs: int, **kwargs: Any) -> VectorEnv:
    """``make_env`` that also knows the learner's own toy envs."""
    family = name.partition("/")[0]
    if family in _LEARNER_ENV_MODULES:
        importlib.import_module(_LEARNER_ENV_MODULES[family])
    return make_env(name, num_envs=num_envs, **kwargs)


def _interleave(parts: list[np.ndarray]) -> np.ndarray:
    """[G][n, ...] -> [n * G, ...] with row j*G + g = parts[g][j]."""
    return np.stack(parts, axis=1).reshape(-1, *parts[0].shape[1:])


def _interleave_obs(parts: list[Observation]) -> Observation:
    g = len(parts)
    instr = (
        [parts[k]["instruction"][j] for j in range(len(parts[0]["instruction"])) for k in range(g)]
        if parts[0].get("instruction")
        else []
    )
    return {
        "state": _interleave([p["state"] for p in parts]),
        "images": {
            c: _interleave([p["images"][c] for p in parts]) for c in parts[0].get("images", {})
        },
        "instruction": instr,
    }


class GroupedVectorEnv(VectorEnv):
    """``G`` member envs of ``n`` rows each, seen as one env of ``n * G`` rows (groups
    contiguous)."""

    def __init__(self, members: list[VectorEnv]) -> None:
        self.members = members
        s = members[0].spec
        self.spec = EnvSpec(
            num_envs=s.num_envs * len(members),
            state_dim=s.state_dim,
            action_dim=s.action_dim,
            cameras=s.cameras,
            max_episode_steps=s.max_episode_steps,
            control_hz=s.control_hz,
            instruction=s.instruction,
            robot=s.robot,
        )

    def reset(self, seed: int | Sequence[int] | None = None) -> Observation:
        """Every member resets from the same seed(s): row ``j`` of each member is group ``j``."""
        return _interleave_obs([m.reset(seed) for m in self.members])

    def step(self, actions: np.ndarray):
        g = len(self.members)
        acts = np.asarray(actions).reshape(-1, g, *np.shape(actions)[1:])
        results = [m.step(acts[:, k]) for k, m in enumerate(self.members)]
        obs = _interleave_obs([r[0] for r in results])
        reward, term, trunc = (_interleave([r[i] for r in results]) for i in (1, 2, 3))
        info: dict[str, Any] = {}
        for key in ("success", "valid_steps", "episode_return", "episode_length"):
            if all(key in r[4] for r in results):
                info[key] = _interleave([r[4][key] for r in results])
        if any("final_observation" in r[4] for r in results):
            info["final_observation"] = _interleave_obs(
                [r[4].get("final_observation", r[0]) for r in results]
            )
        return obs, reward, term, trunc, info

    def close(self) -> None:
        for m in self.members:
            m.close()

    def render_frames(self) -> np.ndarray | None:
        frames = [m.render_frames() for m in self.members]
        return None if any(f is None for f in frames) else _interleave(frames)


TRAIN_SEED_SPACE = 900_000_000  # training seeds live in [0, 9e8); eval uses seed_offset >= 1e9


def stage_seed(seed: int, iteration: int, stream: int, stream_envs: int) -> int:
    """Training seed of a stream's first sub-env at an iteration (sub-env i gets ``+ i``).

    Streams of one iteration get disjoint ranges, iterations are 10^4 apart; everything stays in
    ``[0, TRAIN_SEED_SPACE)`` (and below 2^31 for simulators that want 32-bit seeds), so eval
    seeds from ``eval.seed_offset`` (default 1e9) are held out by construction.
    """
    return (seed * 7_919_993 + iteration * 10_007 + stream * stream_envs) % TRAIN_SEED_SPACE


class StageEnvs:
    """The ``stages`` vector envs of one env worker, with their current observations."""

    def __init__(
        self,
        name: str,
        envs_per_stage: int,
        stages: int,
        group_size: int = 1,
        revisit: FailedStates | None = None,
        **env_kwargs: Any,
    ) -> None:
        if envs_per_stage % group_size:
            raise ValueError(
                f"{envs_per_stage} envs per pipeline stage is not a multiple of "
                f"algorithm.group_size={group_size}; adjust env.num_envs"
            )
        self.envs: list[VectorEnv] = []
        for _ in range(stages):
            if group_size > 1:
                members = [
                    build_env(name, envs_per_stage // group_size, **env_kwargs)
                    for _ in range(group_size)
                ]
                self.envs.append(GroupedVectorEnv(members))
            else:
                self.envs.append(build_env(name, envs_per_stage, **env_kwargs))
        self.group_size = group_size
        self.obs: list[Observation | None] = [None] * stages
        self.revisit = revisit
        self.revisited = 0  # groups of the last reset that re-ran a failed state
        # per stage, this iteration: group seeds, their earlier re-runs, rows whose first episode
        # ended / succeeded (only the first episode of a row counts, as for the grouped estimators)
        self._seeds: list[list[int]] = [[] for _ in range(stages)]
        self._runs: list[list[int]] = [[] for _ in range(stages)]
        self._ended = [np.zeros(envs_per_stage, bool) for _ in range(stages)]
        self._won = [np.zeros(envs_per_stage, bool) for _ in range(stages)]

    @property
    def spec(self) -> EnvSpec:
        return self.envs[0].spec

    def reset(self, seed: int, iteration: int, first_stream: int) -> None:
        """Reset every stage; stage ``k`` is stream ``first_stream + k`` of the run."""
        n = self.spec.num_envs // self.group_size
        if self.revisit is None:
            for k, env in enumerate(self.envs):
                self.obs[k] = env.reset(stage_seed(seed, iteration, first_stream + k, n))
            return
        for k in range(len(self.envs)):  # last iteration's all-fail groups join the queue first
            if self._seeds[k]:
                self.revisit.record(
                    self._seeds[k], self._runs[k], self._won[k].reshape(n, -1).any(axis=1)
                )
        self.revisited = 0
        for k, env in enumerate(self.envs):
            base = stage_seed(seed, iteration, first_stream + k, n)
            self._seeds[k], self._runs[k] = self.revisit.draw([base + j for j in range(n)])
            self.revisited += sum(r > 0 for r in self._runs[k])
            self._ended[k][:], self._won[k][:] = False, False
            self.obs[k] = env.reset(self._seeds[k])

    def step(self, k: int, actions: np.ndarray) -> StepOutcome:
        """Step stage ``k``; its new observation goes to ``obs[k]``."""
        obs, reward, terminated, truncated, info = self.envs[k].step(actions)
        out = StepOutcome.from_step(reward, terminated, truncated, info)
        self.obs[k] = obs
        if self.revisit is not None:
            first = out.done & ~self._ended[k]
            self._won[k] |= first & out.success
            self._ended[k] |= out.done
        return out

    def close(self) -> None:
        for env in self.envs:
            env.close()
