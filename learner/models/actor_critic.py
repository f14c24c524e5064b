"""Actor-critic policies for embodied RL: MLP on state, small CNN (+ state) on images.

One class covers both: the encoder turns the canonical observation into features, a
registered action head turns features into a chunk distribution, a separate MLP critic gives
``V(s)``. Why a separate critic trunk for state policies: sharing it lets value-loss gradients
disturb the policy early in training, which costs more than the extra small MLP.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from learner.models.encoders import ConvEncoder, RunningNorm, mlp
from learner.models.heads import HEADS
from learner.models.policy import Policy, PolicyOutput, PolicySpec


class ActorCriticPolicy(Policy):
    """``obs -> (action chunk distribution, value)``; see the module docstring."""

    def __init__(
        self,
        spec: PolicySpec,
        hidden: list[int] | tuple[int, ...] = (64, 64),
        head: str = "gaussian",
        head_kwargs: dict[str, Any] | None = None,
        normalize_state: bool = True,
        use_images: bool = False,
        cnn_channels: tuple[int, ...] = (16, 32, 32),
        image_feat_dim: int = 64,
    ) -> None:
        super().__init__()
        self.spec = spec
        self.use_images = bool(use_images and spec.cameras)
        if use_images and not spec.cameras:
            raise ValueError(
                "model wants images (use_images=True) but the env spec has no cameras; "
                "set env.obs_mode to an image mode or use model.name=mlp"
            )
        self.cameras = sorted(spec.cameras)
        self.norm = RunningNorm(spec.state_dim) if normalize_state else None
        in_dim = spec.state_dim
        self.cnn: ConvEncoder | None = None
        if self.use_images:
            self.cnn = ConvEncoder(len(self.cameras), tuple(cnn_channels), image_feat_dim)
            in_dim += image_feat_dim
        hidden = list(hidden)
        self.actor_trunk = mlp(in_dim, hidden)
        self.critic_trunk = mlp(in_dim, hidden)
        self.value_head = nn.Linear(hidden[-1] if hidden else in_dim, 1)
        nn.init.orthogonal_(self.value_head.weight, gain=1.0)
        nn.init.zeros_(self.value_head.bias)
        self.head = HEADS.get(head)(
            hidden[-1] if hidden else in_dim, spec.action_dim, spec.chunk, **(head_kwargs or {})
        )

    def features(self, obs: dict[str, Any]) -> Tensor:
        state = obs["state"].float()
        if self.norm is not None:
            state = self.norm(state)
        if self.cnn is None:
            return state
        missing = [c for c in self.cameras if c not in obs.get("images", {})]
        if missing:
            raise KeyError(
                f"observation lacks camera(s) {missing}; the policy was built for {self.cameras}"
            )
        img_feat = self.cnn([obs["images"][c] for c in self.cameras])
        return torch.cat([state, img_feat], dim=-1)

    def forward(self, obs: dict[str, Any]) -> PolicyOutput:
        x = self.features(obs)
        dist = self.head(self.actor_trunk(x))
        value = self.value_head(self.critic_trunk(x)).squeeze(-1)
        return PolicyOutput(dist=dist, value=value)

    def update_normalizer(self, states: Tensor) -> None:
        """Fold a batch of raw states into the running stats (no-op without a normaliser)."""
        if self.norm is not None:
            self.norm.update(states)
