"""The vector-env contract every simulator bridge (and `RosRobotEnv`) implements.

Why one contract: env workers, the policy server's eval client and the ROS bridge all step
envs without knowing which simulator is behind them. Observations use the canonical map of
DESIGN.md, batched on a leading axis:

    obs = {"state": float32 [B, D],
           "images": {camera_name: uint8 [B, H, W, 3]},   # {} for state-only envs
           "instruction": list[str] (length B)}

Actions are float32 in [-1, 1]: ``[B, A]`` for one control step or ``[B, chunk, A]`` for an
action chunk executed open-loop. With a chunk, ``reward`` is ``[B, chunk]`` (zero after the
episode ended inside the chunk), ``terminated`` / ``truncated`` are ``[B]`` and refer to the
chunk as a whole, and ``info["valid_steps"]`` is a bool ``[B, chunk]`` mask of the sub-steps
that were really executed. With ``[B, A]``, ``reward`` is ``[B]``.

Auto-reset: an env whose episode ended is reset inside the same ``step`` call; the returned obs
row is the first obs of the new episode and the last obs of the old one is kept in
``info["final_observation"]`` (same batched layout; rows valid where ``done``).
``info["success"]`` (bool [B]) is the task's success test for the step (for a finished episode:
whether it succeeded), ``info["episode_return"]`` / ``info["episode_length"]`` are valid where
done.

These rules are implemented once, in :class:`rlinf_contracts.stepping.SteppedVectorEnv`: a
family writes its hooks (step some rows, reset rows, observe) and inherits ``step``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlinf_contracts.spec import RobotSpec

Observation = dict[str, Any]
StepResult = tuple[Observation, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


class ActionShapeError(ValueError):
    """Raised when a step receives actions of the wrong shape or dtype."""


@dataclass(frozen=True)
class EnvSpec:
    """What a policy must know about an env: sizes, cameras, rate, episode length."""

    num_envs: int
    state_dim: int
    action_dim: int
    cameras: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (H, W)
    max_episode_steps: int = 100
    control_hz: float = 10.0
    instruction: str = ""
    # what the numbers mean (state layout, action space): what a policy trained here carries to
    # a robot; None for envs that declare no layout (toy envs, external simulators' raw state)
    robot: RobotSpec | None = None

    def observation_spec(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """Per-sample (unbatched) dtype and shape of every array key, as the policy server
        checks."""
        spec: dict[str, tuple[str, tuple[int, ...]]] = {"state": ("float32", (self.state_dim,))}
        for name, (h, w) in self.cameras.items():
            spec[f"images/{name}"] = ("uint8", (h, w, 3))
        return spec


class VectorEnv(abc.ABC):
    """Batched env: B sub-envs stepped together in one process."""

    spec: EnvSpec

    @property
    def num_envs(self) -> int:
        return self.spec.num_envs

    @abc.abstractmethod
    def reset(self, seed: int | Sequence[int] | None = None) -> Observation:
        """Reset all sub-envs; sub-env i is seeded with ``seed + i`` when a seed is given.

        A sequence gives each sub-env its own seed (``seed[i]``): a learner re-running chosen
        start states needs it. Families built on ``SteppedVectorEnv`` accept it; others may
        raise ``TypeError``."""

    @abc.abstractmethod
    def step(self, actions: np.ndarray) -> StepResult:
        """Apply ``[B, A]`` or ``[B, chunk, A]`` actions; see the module docstring."""

    def close(self) -> None:  # noqa: B027 -- optional: families without resources keep the no-op
        """Release simulator / render resources."""

    def render_frames(self) -> np.ndarray | None:
        """Optional: uint8 [B, H, W, 3] frames for videos; None when the env cannot render."""
        return None

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_actions(actions: Any, spec: EnvSpec) -> np.ndarray:
    """Validate and normalise actions to float32 ``[B, chunk, A]`` with a clear error message."""
    arr = np.asarray(actions)
    if arr.dtype.kind not in "fiu":
        raise ActionShapeError(f"actions must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 2:
        arr = arr[:, None, :]
    if arr.ndim != 3 or arr.shape[0] != spec.num_envs or arr.shape[2] != spec.action_dim:
        raise ActionShapeError(
            f"actions must have shape [B={spec.num_envs}, A={spec.action_dim}] or "
            f"[B={spec.num_envs}, chunk, A={spec.action_dim}], got {tuple(np.shape(actions))}"
        )
    if not np.all(np.isfinite(arr)):
        raise ActionShapeError("actions contain NaN or inf")
    return np.clip(arr.astype(np.float32, copy=False), -1.0, 1.0)


def slice_obs(obs: Observation, index: np.ndarray | slice) -> Observation:
    """Rows ``index`` of a batched observation (used to split env batches into pipeline stages)."""
    instr = obs.get("instruction", [])
    if isinstance(index, slice):
        instr_sel = list(instr[index])
    else:
        instr_sel = [instr[i] for i in np.asarray(index).tolist()]
    return {
        "state": obs["state"][index],
        "images": {k: v[index] for k, v in obs.get("images", {}).items()},
        "instruction": instr_sel,
    }


def concat_obs(parts: list[Observation]) -> Observation:
    """Inverse of :func:`slice_obs` over a list of contiguous parts."""
    cams = parts[0].get("images", {}).keys()
    return {
        "state": np.concatenate([p["state"] for p in parts]),
        "images": {c: np.concatenate([p["images"][c] for p in parts]) for c in cams},
        "instruction": [s for p in parts for s in p.get("instruction", [])],
    }
