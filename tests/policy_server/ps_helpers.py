"""Small real policies for policy-server tests: actions are an exact function of the weights."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from learner.models.policy import Policy, PolicyOutput, PolicySpec
from learner.serving import TorchPolicy
from policy_server.background import ServerThread
from policy_server.config import ServerConfig
from policy_server.server import PolicyServer

TOKEN = "test-token-123456"


class PointDist:
    """A deterministic 'distribution' (mode = sample = the mean)."""

    def __init__(self, mean: torch.Tensor) -> None:
        self.mean = mean

    def mode(self) -> torch.Tensor:
        return self.mean

    def sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mean, torch.zeros(self.mean.shape[0])

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return torch.zeros(actions.shape[0])

    def entropy(self) -> torch.Tensor:
        return torch.zeros(self.mean.shape[0])


class LinearPolicy(Policy):
    """actions = W @ state + b as [chunk, A]; state == 999 in its first entry raises (to test
    errors)."""

    def __init__(
        self,
        state_dim: int = 4,
        action_dim: int = 2,
        chunk: int = 3,
        cameras: dict[str, tuple[int, int]] | None = None,
        uses_instruction: bool = False,
    ) -> None:
        super().__init__()
        self.spec = PolicySpec(state_dim, action_dim, chunk, dict(cameras or {}), uses_instruction)
        self.lin = nn.Linear(state_dim, chunk * action_dim)
        self.load_state_dict(version_weights(self, 0))

    def forward(self, obs: dict[str, Any]) -> PolicyOutput:
        state = obs["state"]
        if bool((state[:, 0] == 999).any()):
            raise RuntimeError("poisoned observation (state[0] == 999)")
        out = self.lin(state).view(state.shape[0], self.spec.chunk, self.spec.action_dim)
        return PolicyOutput(PointDist(out), None)


def version_weights(policy: LinearPolicy, version: int) -> dict[str, torch.Tensor]:
    """Weights whose actions identify ``version``: W = (v+1)/100 everywhere, b = v."""
    w = torch.full_like(policy.lin.weight, (version + 1) / 100.0)
    b = torch.full_like(policy.lin.bias, float(version))
    return {"lin.weight": w, "lin.bias": b}


def expected_actions(
    state: np.ndarray, version: int, chunk: int = 3, action_dim: int = 2
) -> np.ndarray:
    value = np.float32((version + 1) / 100.0) * np.float32(
        state.astype(np.float32).sum()
    ) + np.float32(version)
    return np.full((chunk, action_dim), value, dtype=np.float32)


def local_config(**kw: Any) -> ServerConfig:
    kw.setdefault("host", "127.0.0.1")
    kw.setdefault("port", 0)
    return ServerConfig(**kw)


@contextlib.contextmanager
def running_server(policy: Policy | None = None, **config: Any) -> Iterator[ServerThread]:
    server = PolicyServer(
        TorchPolicy(policy or LinearPolicy()), local_config(**config), policy_name="linear"
    )
    with ServerThread(server) as srv:
        yield srv
