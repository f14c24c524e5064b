"""Off-policy actor (SAC / RLPD / CrossQ) and its observation encoder, servable like any policy.

``SquashedGaussianPolicy`` maps an observation to a tanh-Gaussian over ``[-1, 1]^A`` with a
state-dependent std (SAC's actor). Its :class:`ObsEncoder` is the state vector, plus, with
cameras, a small pixel encoder (DrQ-style: stride-2 convs, flatten, linear, LayerNorm, tanh).
Why the encoder lives in the policy: checkpoints and the policy server need the whole
``obs -> action`` path; the critic of an image run holds *the same* encoder object and is the
only one that trains it (``learner.offpolicy.nets``), as DrQ does.

``log_std`` is squashed smoothly into ``[LOG_STD_MIN, LOG_STD_MAX]`` (no dead clamp gradient);
the range equals :class:`~learner.models.distributions.ChunkTanhGaussian`'s, so the served
distribution and the one trained are the same.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from learner.algorithms.distributions import TanhGaussian
from learner.models.distributions import ChunkTanhGaussian
from learner.models.encoder_kinds import ENCODER_KINDS, build_pixel_encoder, encode_cached
from learner.models.policy import Policy, PolicyOutput, PolicySpec

LOG_STD_MIN, LOG_STD_MAX = -5.0, 1.0


class PixelEncoder(nn.Module):
    """``uint8 [B, H, W, 3]`` per camera -> ``[B, out_dim]``: stride-2 convs, flatten, linear,
    LayerNorm, tanh (the DrQ / SAC-AE head). Flattening keeps *where* things are in the image,
    which a global pool would throw away (reach from pixels must locate the target)."""

    def __init__(
        self,
        num_cameras: int,
        hw: tuple[int, int],
        channels: tuple[int, ...] = (16, 32, 32),
        out_dim: int = 50,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3 * num_cameras
        for c in channels:  # in-place ReLU: the conv's backward needs its input, not its output
            layers += [nn.Conv2d(c_in, c, kernel_size=3, stride=2, padding=1), nn.ReLU(True)]
            c_in = c
        self.convs = nn.Sequential(*layers)
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, 3 * num_cameras, *hw)).numel()
        self.head = nn.Sequential(nn.Linear(flat, out_dim), nn.LayerNorm(out_dim), nn.Tanh())
        self.out_dim = out_dim

    def forward(self, images: list[Tensor]) -> Tensor:
        x = torch.cat([img.permute(0, 3, 1, 2) for img in images], dim=1).float() / 255.0 - 0.5
        return self.head(self.convs(x).flatten(1))


ENCODER_KINDS.add("cnn", PixelEncoder)  # model.encoder.kind: cnn (the other kinds: encoder_kinds)


class ObsEncoder(nn.Module):
    """Observation -> features: ``state`` (a tensor or ``{"state", "images"}``), concatenated with
    pixel features when the policy reads cameras. Without cameras it has no parameters."""

    def __init__(
        self,
        spec: PolicySpec,
        use_images: bool = False,
        cnn_channels: tuple[int, ...] = (16, 32, 32),
        image_feat_dim: int = 50,
        encoder: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if use_images and not spec.cameras:
            raise ValueError(
                "model wants images (use_images=True) but the env spec has no cameras; "
                "set env.obs_mode to an image mode (rgb, state+rgb)"
            )
        self.cameras = sorted(spec.cameras) if use_images else []
        self.pixels: nn.Module | None = None
        self.out_dim = spec.state_dim
        if self.cameras:
            sizes = {tuple(spec.cameras[c]) for c in self.cameras}
            if len(sizes) != 1:
                raise ValueError(
                    f"cameras {self.cameras} differ in size {sorted(sizes)}; use one image size"
                )
            opts = dict(encoder or {})  # model.encoder: kind (+ its channels); default cnn
            kind, chans = opts.pop("kind", "cnn"), opts.pop("channels", cnn_channels)
            self.pixels = build_pixel_encoder(
                kind, len(self.cameras), sizes.pop(), tuple(chans), image_feat_dim, **opts
            )
            self.out_dim += int(getattr(self.pixels, "out_dim", image_feat_dim))

    def forward(self, obs: Tensor | dict[str, Any]) -> Tensor:
        if isinstance(obs, Tensor):  # a replay batch: the state, plus cached features if any
            if self.pixels is None:
                return obs.float()
            return encode_cached(self.pixels, obs.float(), self.out_dim - self.pixels.out_dim)
        state = obs["state"].float()
        if self.pixels is None:
            return state
        return torch.cat([state, self.pixels([obs["images"][c] for c in self.cameras])], dim=-1)


def relu_mlp(in_dim: int, hidden: list[int] | tuple[int, ...], out_dim: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), nn.ReLU()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class SquashedGaussianPolicy(Policy):
    """SAC's actor as a :class:`~learner.models.policy.Policy` (chunk 1, no value head)."""

    def __init__(
        self,
        spec: PolicySpec,
        hidden: list[int] | tuple[int, ...] = (256, 256),
        use_images: bool = False,
        cnn_channels: tuple[int, ...] = (16, 32, 32),
        image_feat_dim: int = 50,
        encoder: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if spec.chunk != 1:
            raise ValueError(
                f"the off-policy actor acts one step at a time; spec.chunk={spec.chunk}"
            )
        self.spec = spec
        self.encoder = ObsEncoder(spec, use_images, tuple(cnn_channels), image_feat_dim, encoder)
        self.net = relu_mlp(self.encoder.out_dim, list(hidden), 2 * spec.action_dim)

    def distribution(self, features: Tensor) -> TanhGaussian:
        """The ``[B, A]`` tanh-Gaussian of encoded features (what the SAC losses use)."""
        mean, raw = self.net(features).chunk(2, dim=-1)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(raw) + 1.0)
        return TanhGaussian(mean, log_std, LOG_STD_MIN, LOG_STD_MAX)

    def forward(self, obs: dict[str, Any]) -> PolicyOutput:
        d = self.distribution(self.encoder(obs))
        return PolicyOutput(
            dist=ChunkTanhGaussian(d.mean.unsqueeze(1), d.log_std.unsqueeze(1)), value=None
        )
