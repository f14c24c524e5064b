"""``SteppedVectorEnv``: the vector-env contract's ``step`` written once, over small hooks.

Why: chunking, termination vs truncation, episode statistics, ``final_observation`` and
auto-reset (the rules in :mod:`rlinf_contracts.env`) are the same for every simulator, and six
hand-written copies drifted. A family implements only what differs: one control step for the
rows still running, resetting rows, observing. Everything the learner reads from ``step`` comes
from :meth:`SteppedVectorEnv.step`.

Hooks (``Rows`` is ``slice(None)`` when every row takes part — index your arrays with it to
get views, not copies, on the hot path — else a sorted int array of row ids):

- ``_step_rows(rows, actions [n, A]) -> RowStep`` (required): apply one control step to
  ``rows`` only and score it. Return arrays of length ``n`` in the order of ``rows``. A
  simulator that can only step every row together (GPU-batched) steps the others with an idle
  action, ignores their results and sets ``steps_idle_rows = True``.
- ``_reset_rows(rows: int array)`` (required): start a new episode in ``rows``; per-row
  randomness comes from ``self._rngs[i]`` (seeded ``seed + i`` by :meth:`reset`). Called by
  :meth:`reset` for every row and by ``step`` for the rows whose episode ended. Episode
  statistics are cleared by the base class, not here.
- ``_observe() -> Observation`` (required): the batched observation of every row, in fresh
  arrays (the caller keeps them; ``final_observation`` may be this very dict).
- ``_observe_after_reset(rows, obs) -> Observation`` (optional): the observation after
  ``rows`` were reset, given ``obs`` from before; must not modify ``obs`` (it becomes
  ``final_observation``). The default calls ``_observe()``; override it when observing every
  row is expensive (rendering) to copy ``obs`` and refresh only ``rows``.
- ``_seed(seed)`` (optional): the default gives row ``i`` the generator ``default_rng(seed + i)``,
  or ``default_rng(seed[i])`` for a sequence of per-row seeds.

A family that must reset differently (the simulator seeds itself, or resets every row in one
call) may override :meth:`reset`; it must then call :meth:`_begin_episodes` on all rows.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlinf_contracts.env import EnvSpec, Observation, StepResult, VectorEnv, check_actions

Rows = slice | np.ndarray


@dataclass
class RowStep:
    """What one control step of ``n`` rows produced; every array has length ``n``."""

    reward: np.ndarray  # float [n]
    success: np.ndarray  # bool [n]: the task's success test after this step
    # the simulator's own verdicts, where it has them: ``terminated`` ends the episode (a failure
    # such as a dropped object, or the simulator's own success term), ``truncated`` cuts it (its
    # own time limit); the base class adds success (with terminate_on_success) and the episode
    # budget ``spec.max_episode_steps``
    terminated: np.ndarray | None = None  # bool [n]
    truncated: np.ndarray | None = None  # bool [n]


def copy_obs(obs: Observation) -> Observation:
    """A deep copy of a batched observation (arrays and the instruction list)."""
    return {
        "state": obs["state"].copy(),
        "images": {k: v.copy() for k, v in obs["images"].items()},
        "instruction": list(obs["instruction"]),
    }


def merge_final_rows(
    final: Observation | None, obs: Observation, rows: np.ndarray
) -> Observation | None:
    """Keep each env's observation from the sub-step its episode ended (rows where ``rows``)."""
    if not rows.any():
        return final
    if final is None:
        return copy_obs(obs)
    final["state"][rows] = obs["state"][rows]
    for cam, img in obs["images"].items():
        final["images"][cam][rows] = img[rows]
    return final


def row_seeds(seed: int | Sequence[int], num_envs: int) -> list[int]:
    """The contract's reset seed as one seed per row: ``seed + i``, or the given sequence."""
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(num_envs)]
    if len(seed) != num_envs:
        raise ValueError(f"reset got {len(seed)} seeds for {num_envs} rows")
    return [int(s) for s in seed]


class SteppedVectorEnv(VectorEnv):
    """A :class:`VectorEnv` whose ``reset`` / ``step`` follow the contract over the hooks in the
    module docstring. Subclasses call ``super().__init__(spec, terminate_on_success)``."""

    #: True when a control step advances every row, running or not (GPU-batched simulators):
    #: the final observation is then taken at the sub-step each episode ended.
    steps_idle_rows: bool = False

    def __init__(self, spec: EnvSpec, terminate_on_success: bool = True) -> None:
        self.spec = spec
        self.terminate_on_success = terminate_on_success
        b = spec.num_envs
        self._all_rows = np.arange(b)
        self._rngs = [np.random.default_rng(None) for _ in range(b)]
        self._steps = np.zeros(b, dtype=np.int64)
        self._returns = np.zeros(b, dtype=np.float64)
        self._ever_success = np.zeros(b, dtype=bool)
        self._needs_reset = True

    # ---------------------------------------------------------------- hooks
    @abc.abstractmethod
    def _step_rows(self, rows: Rows, actions: np.ndarray) -> RowStep:
        """One control step of ``rows`` with ``actions [n, A]`` in [-1, 1]."""

    @abc.abstractmethod
    def _reset_rows(self, rows: np.ndarray) -> None:
        """Start a new episode in ``rows`` (seeded from ``self._rngs[i]``)."""

    @abc.abstractmethod
    def _observe(self) -> Observation:
        """Batched observation of every row, in fresh arrays."""

    def _observe_after_reset(self, rows: np.ndarray, obs: Observation) -> Observation:
        """Observation after ``rows`` were reset; ``obs`` (from before) must stay unchanged."""
        return self._observe()

    def _seed(self, seed: int | Sequence[int]) -> None:
        self._rngs = [np.random.default_rng(s) for s in row_seeds(seed, self.num_envs)]

    # ------------------------------------------------------------- contract
    def _begin_episodes(self, rows: np.ndarray) -> None:
        """Clear the episode statistics of ``rows``; stepping is allowed from now on."""
        self._steps[rows], self._returns[rows], self._ever_success[rows] = 0, 0.0, False
        self._needs_reset = False

    def reset(self, seed: int | Sequence[int] | None = None) -> Observation:
        if seed is not None:
            self._seed(seed)
        self._reset_rows(self._all_rows)
        self._begin_episodes(self._all_rows)
        return self._observe()

    def step(self, actions: np.ndarray) -> StepResult:
        if self._needs_reset:
            raise RuntimeError(f"call reset() before step() on a {type(self).__name__}")
        chunked = np.ndim(actions) == 3
        acts = check_actions(actions, self.spec)
        b, chunk, _ = acts.shape
        rewards = np.zeros((b, chunk), dtype=np.float32)
        valid = np.zeros((b, chunk), dtype=bool)
        term, trunc, success = (np.zeros(b, dtype=bool) for _ in range(3))
        final: Observation | None = None
        for k in range(chunk):
            idx = np.flatnonzero(~(term | trunc))
            if idx.size == 0:
                break
            rows: Rows = slice(None) if idx.size == b else idx  # views, not copies, when all run
            res = self._step_rows(rows, acts[rows, k])
            self._account(rows, k, res, rewards, valid, term, trunc, success)
            if self.steps_idle_rows:
                ended = np.zeros(b, dtype=bool)
                ended[rows] = term[rows] | trunc[rows]
                if ended.any():
                    final = merge_final_rows(final, self._observe(), ended)
        obs = self._observe()
        done = term | trunc
        info: dict[str, Any] = {
            "success": success,
            "episode_return": np.where(done, self._returns, 0.0).astype(np.float32),
            "episode_length": np.where(done, self._steps, 0),
            "valid_steps": valid,
        }
        if done.any():
            ended_rows = np.flatnonzero(done)
            info["final_observation"] = final if final is not None else obs
            success[ended_rows] = self._ever_success[
                ended_rows
            ]  # a finished episode: did it succeed
            self._reset_rows(ended_rows)
            self._begin_episodes(ended_rows)
            obs = self._observe_after_reset(ended_rows, obs)
        return obs, rewards if chunked else rewards[:, 0], term, trunc, info

    def _account(
        self,
        rows: Rows,
        k: int,
        res: RowStep,
        rewards: np.ndarray,
        valid: np.ndarray,
        term: np.ndarray,
        trunc: np.ndarray,
        success: np.ndarray,
    ) -> None:
        """Book sub-step ``k`` of ``rows``: rewards, statistics, termination and truncation."""
        ok = res.success
        valid[rows, k] = True
        rewards[rows, k] = res.reward
        success[rows] = ok
        self._returns[rows] += res.reward
        self._steps[rows] += 1
        self._ever_success[rows] |= ok
        ended = ok & self.terminate_on_success
        if res.terminated is not None:
            ended = ended | res.terminated
        out_of_time = self._steps[rows] >= self.spec.max_episode_steps
        if res.truncated is not None:
            out_of_time = out_of_time | res.truncated
        term[rows] = ended
        trunc[rows] = ~ended & out_of_time
