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

from learner.models.encoder_kinds import BACKBONES, DEFAULT_BACKBONE, to_unit
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
    """One camera (+ optional state) -> ``p_success``, read by one of two image parts:

    * a small CNN trained with the head (stride-2 convs, average pool to ``pool`` x ``pool``:
      where things are matters), then an MLP;
    * with ``backbone`` (its conv channels): a frozen pretrained backbone, by default the
      keypoint CNN of the camera-only RL runs (``backbone_kind`` picks another entry of
      :data:`~learner.models.backbones.BACKBONES`, e.g. SERL's ResNet-10 as HIL-SERL's classifier
      reads it; weights loaded by the runner and saved in the checkpoint), then a two-layer MLP.

    Why the frozen backbone: "the cube inside the goal disc" is a simple function of where the
    cube and the disc are, which the pretrained points already say; a CNN fitted to a few dozen
    positive frames learns whatever else separates them too and says success on frames a
    policy then learns to produce. On noisy rollouts it never trained on, the points gave a
    fraction of the CNN's false positives (``benchmarks/results/reward_classifier_errors.md``).

    ``obs`` may carry ``"features"`` (the image part's output, precomputed once per frame by the
    runner while the backbone is frozen) in place of the images.
    """

    def __init__(
        self,
        spec: PolicySpec,
        camera: str = "",
        channels: tuple[int, ...] = (16, 32, 32),
        hidden: int = 64,
        use_state: bool = False,
        pool: int = 8,
        backbone: tuple[int, ...] | None = None,
        backbone_kind: str = DEFAULT_BACKBONE,
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
        extra = spec.state_dim if use_state else 0
        self.backbone: nn.Module | None = None
        if backbone:
            build = BACKBONES.get(backbone_kind)
            hw = spec.cameras[self.camera]
            self.backbone = build(channels=tuple(backbone), grid=0, hw=hw).requires_grad_(False)
            self.conv: nn.Module = nn.Identity()
            width = self.backbone.out_dim + extra
            self.head = nn.Sequential(
                nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
            )
            self.head.append(nn.Linear(hidden, 1))
        else:
            layers: list[nn.Module] = []
            c_in = 3
            for c in channels:
                layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.ReLU()]
                c_in = c
            self.conv = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(pool), nn.Flatten())
            width = c_in * pool * pool + extra
            self.head = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    @property
    def frozen_features(self) -> bool:
        """True when the image part never trains (its features can be computed once per frame)."""
        return self.backbone is not None

    def train(self, mode: bool = True) -> SuccessClassifier:
        super().train(mode)
        if self.backbone is not None:
            self.backbone.eval()  # frozen: no train-mode behaviour ever
        return self

    def image_features(self, obs: dict[str, Any]) -> Tensor:
        """The image part's output ``[B, F]`` for ``obs["images"][camera]``."""
        img = obs["images"][self.camera]
        if self.backbone is not None:
            with torch.no_grad():
                return self.backbone(to_unit(img))
        return self.conv(img.float().permute(0, 3, 1, 2) / 255.0)

    def logits(self, obs: dict[str, Any]) -> Tensor:
        """``obs`` from ``obs_to_tensors`` (or with precomputed ``"features"``) -> logits [B]."""
        feat = obs["features"] if "features" in obs else self.image_features(obs)
        if self.use_state:
            feat = torch.cat([feat, obs["state"].float()], dim=-1)
        return self.head(feat).squeeze(-1)

    def forward(self, obs: dict[str, Any]) -> PolicyOutput:
        p = torch.sigmoid(self.logits(obs))
        return PolicyOutput(dist=PointMass(p[:, None, None]), value=None)
