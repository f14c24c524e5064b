"""The policy contract: what env rollout workers, the actor and the policy server rely on.

A policy maps a batch of canonical observations (see ``rlinf_contracts.env``) to a
distribution over action chunks ``[B, chunk, A]`` in [-1, 1], and optionally a value estimate.
Keeping this one small interface lets the policy server serve any learner model, and the
runners train any of them, without knowing the architecture.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from rlinf_contracts.spec import RobotSpec


@dataclass(frozen=True)
class PolicySpec:
    """Observation and action layout a policy was built for (saved with every checkpoint).

    The sizes are what the network needs; ``robot`` is what the numbers *mean* (the env's
    robot/task spec as the policy consumes it: its chunk, only the cameras it reads), so a
    checkpoint served to a robot can be checked against that robot. ``None`` for models built
    without an env (served with a ``raw`` spec that fixes sizes only).
    """

    state_dim: int
    action_dim: int
    chunk: int = 1
    cameras: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (H, W)
    uses_instruction: bool = False
    robot: RobotSpec | None = None

    def robot_spec(self) -> RobotSpec:
        """The robot spec to announce when serving: ``robot``, or a size-only ``raw`` spec."""
        if self.robot is not None:
            return self.robot
        return RobotSpec.raw(
            self.state_dim, self.action_dim, self.chunk, self.cameras, self.uses_instruction
        )

    def observation_spec(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """Per-sample dtype and shape of every array key (``images/<cam>`` for cameras)."""
        spec: dict[str, tuple[str, tuple[int, ...]]] = {"state": ("float32", (self.state_dim,))}
        for name, (h, w) in self.cameras.items():
            spec[f"images/{name}"] = ("uint8", (int(h), int(w), 3))
        return spec

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cameras"] = {k: list(v) for k, v in self.cameras.items()}
        d["robot"] = None if self.robot is None else self.robot.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicySpec:
        d = dict(d)
        d["cameras"] = {k: tuple(v) for k, v in d.get("cameras", {}).items()}
        if d.get("robot") is not None:
            d["robot"] = RobotSpec.from_dict(d["robot"])
        return cls(**d)


class ActionDistribution(Protocol):
    """Distribution over action chunks; log-probs are per sample (summed over chunk and dims)."""

    def sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions [B, chunk, A], log_prob [B])"""

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """log_prob [B] of actions [B, chunk, A]"""

    def mode(self) -> torch.Tensor:
        """deterministic actions [B, chunk, A]"""

    def entropy(self) -> torch.Tensor:
        """entropy (or an estimate) [B]"""


@dataclass
class PolicyOutput:
    dist: ActionDistribution
    value: torch.Tensor | None  # [B] or None for actor-only policies


def obs_to_tensors(obs: dict[str, Any], device: torch.device | str = "cpu") -> dict[str, Any]:
    """Canonical numpy observation batch -> tensors (images stay uint8; models normalise)."""
    out: dict[str, Any] = {
        "state": torch.as_tensor(np.asarray(obs["state"], dtype=np.float32), device=device)
    }
    out["images"] = {
        k: torch.as_tensor(np.ascontiguousarray(v), device=device)
        for k, v in (obs.get("images") or {}).items()
    }
    out["instruction"] = list(obs.get("instruction") or [])
    return out


def executable(actions: np.ndarray, action_dim: int) -> np.ndarray:
    """The columns of sampled actions ``[B, chunk, ...]`` an env executes: the first ``action_dim``.

    Why a policy may return more: a flow policy's log-prob needs its denoising chain, which it
    appends as latent columns (``learner.models.vla_heads``); the trajectory keeps the whole row
    for the PPO ratio, the env gets only the action.
    """
    return actions if actions.shape[-1] == action_dim else actions[..., :action_dim]


class Policy(nn.Module, abc.ABC):
    """Base class of every learner policy."""

    spec: PolicySpec

    @abc.abstractmethod
    def forward(self, obs: dict[str, Any]) -> PolicyOutput:
        """obs: output of :func:`obs_to_tensors` (batched)."""

    @torch.no_grad()
    def act(
        self, obs: dict[str, Any], deterministic: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """numpy obs batch -> (actions [B, chunk, A] float32, log_prob [B], value [B] | None)."""
        out = self(obs_to_tensors(obs, next(self.parameters()).device))
        if deterministic:
            actions = out.dist.mode()
            logp = out.dist.log_prob(actions)
        else:
            actions, logp = out.dist.sample()
        value = None if out.value is None else out.value.float().cpu().numpy()
        return actions.float().cpu().numpy(), logp.float().cpu().numpy(), value
