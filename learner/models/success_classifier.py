"""A binary success classifier served as a policy: its one "action" is ``p_success`` in [0, 1].

Why a policy: the policy server serves anything with a robot spec and ``infer`` -- so a reward
classifier trained here is served by ``rlinf serve --checkpoint`` unchanged (batching, weight
push, health, metrics), and the robot PC's reward node asks it over the same wire as the policy
client does, without torch. ``act`` returns ``[B, 1, 1]`` probabilities; ``logits`` is what the
runner trains with BCE.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from learner.models.policy import Policy, PolicyOutput, PolicySpec


class PointMass:
    """A deterministic "distribution" (the classifier's probability); log-prob 0, entropy 0."""

    def __init__(self, value: Tensor) -> None:
        self.value = value

    def sample(self) -> tuple[Tensor, Tensor]:
        return self.value, torch.zeros(self.value.shape[0], device=self.value.device)

    def log_prob(self, actions: Tensor) -> Tensor:
        return torch.zeros(actions.shape[0], device=actions.device)

    def mode(self) -> Tensor:
        return self.value

    def entropy(self) -> Tensor:
        return torch.zeros(self.value.shape[0], device=self.value.device)


class SuccessClassifier(Policy):
    """Small CNN on one camera (+ optional state): stride-2 convs, average pool to ``pool`` x
    ``pool`` (where things are matters), MLP."""

    def __init__(
        self,
        spec: PolicySpec,
        camera: str = "",
        channels: tuple[int, ...] = (16, 32, 32),
        hidden: int = 64,
        use_state: bool = False,
        pool: int = 8,
    ) -> None:
        super().__init__()
        if not spec.cameras:
            raise ValueError(
                "success classifier needs a camera in its spec (spec.cameras is empty)"
            )
        self.spec = spec
        self.camera = camera or next(iter(spec.cameras))
        if self.camera not in spec.cameras:
            raise ValueError(f"camera {self.camera!r} not in spec cameras {sorted(spec.cameras)}")
        self.use_state = use_state
        layers: list[nn.Module] = []
        c_in = 3
        for c in channels:
            layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.ReLU()]
            c_in = c
        self.conv = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(pool), nn.Flatten())
        feat = c_in * pool * pool + (spec.state_dim if use_state else 0)
        self.head = nn.Sequential(nn.Linear(feat, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def logits(self, obs: dict[str, Any]) -> Tensor:
        """``obs`` from ``obs_to_tensors`` -> logits [B]."""
        img = obs["images"][self.camera].float().permute(0, 3, 1, 2) / 255.0
        feat = self.conv(img)
        if self.use_state:
            feat = torch.cat([feat, obs["state"].float()], dim=-1)
        return self.head(feat).squeeze(-1)

    def forward(self, obs: dict[str, Any]) -> PolicyOutput:
        p = torch.sigmoid(self.logits(obs))
        return PolicyOutput(dist=PointMass(p[:, None, None]), value=None)
