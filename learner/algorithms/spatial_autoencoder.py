"""Deep spatial autoencoder: self-supervised pretraining of a keypoint image encoder.

The encoder (any module ``float [N, 3, H, W] -> [N, F]``, here
:class:`~learner.models.encoder_kinds.KeypointBackbone`: convs then a spatial softmax) maps a
camera frame to ``F / 2`` image points; a decoder per camera reconstructs the frame,
downsampled to ``target_hw``, from those points alone (Finn et al. 2016, "Deep Spatial
Autoencoders for Visuomotor Learning", who pretrained this for robot pushing with a linear
decoder; :mod:`learner.algorithms.keypoint_decoders` has it and a heatmap painter).

Why this objective (and not contrastive SimCLR / BYOL): the points must say *where* the cube,
the goal marker and the gripper are, and reconstruction from a handful of coordinates can only
succeed by tracking them, while a contrastive loss with random-shift views is trained to *ignore*
small translations. It is also cheap on a CPU: one forward per frame, no second view, no large
negative batch, no target network -- a few thousand updates of a 64 px batch take minutes.

Inputs are shifted by up to ``pad`` px (the same augmentation the RL batches see) and the target
is the shifted frame, so the points learn to follow content rather than the image border.

The demonstrations' actions as a second objective (``action_weight > 0``): a small MLP predicts
each demo step's action from the points of every camera and the step's proprioception. Why:
reconstruction alone rewards drawing whatever moves most -- the arm -- and on the frames a push
visits the autoencoder's points placed the cube and the goal hardly better than the same
backbone's initial weights (``benchmarks/encoder_probe.py``); what the demonstrator did depends
on where the cube and the goal are relative to the hand, so predicting it pulls points onto them.
It uses only what a bench records (frames, joint state, the teleoperated action), no object
labels.

>>> import torch
>>> from torch import nn
>>> enc = nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1), nn.Flatten(), nn.LazyLinear(8))
>>> algo = SpatialAutoencoderLearner(enc, 8, ["third"], AutoencoderConfig(target_hw=(8, 8)))
>>> m = algo.update({"third": torch.zeros(2, 16, 16, 3, dtype=torch.uint8)})
>>> sorted(m), algo.updates
(['grad_norm', 'loss'], 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from learner.algorithms.keypoint_decoders import DECODERS, DEFAULT_DECODER

__all__ = ["ActionTargets", "AutoencoderConfig", "SpatialAutoencoderLearner"]


@dataclass(frozen=True)
class AutoencoderConfig:
    lr: float = 1e-3
    target_hw: tuple[int, int] = (32, 32)  # reconstruction size (downsampled frame)
    pad: int = 4  # random shift of the input (and its target), px
    grad_clip: float = 10.0
    seed: int = 0
    # extra weight of pixels that differ from the batch's median frame (0 = plain MSE)
    foreground_weight: float = 0.0
    # weight of the demo-action prediction loss (0 = reconstruction only)
    action_weight: float = 0.0
    action_hidden: int = 256
    # how the points are drawn back into a frame (learner.algorithms.keypoint_decoders)
    decoder: str = DEFAULT_DECODER


@dataclass(frozen=True)
class ActionTargets:
    """The demo steps' shape and proprioception scale the action head needs (from the data)."""

    state_mean: Tensor  # [S]
    state_std: Tensor  # [S], clamped away from 0 (zeroed task features stay 0)
    action_dim: int


def _unit(images: Tensor) -> Tensor:
    return images.permute(0, 3, 1, 2).float() / 255.0 - 0.5


def _shift(x: Tensor, pad: int, generator: torch.Generator) -> Tensor:
    """``float [N, C, H, W]`` shifted by up to ``pad`` px per sample (edge pad, random crop)."""
    if pad <= 0:
        return x
    n, _, h, w = x.shape
    padded = F.pad(x, (pad,) * 4, mode="replicate")
    off = torch.randint(0, 2 * pad + 1, (n, 2), generator=generator).tolist()
    return torch.stack([padded[i, :, y : y + h, z : z + w] for i, (y, z) in enumerate(off)])


def foreground_weights(target: Tensor, weight: float) -> Tensor:
    """``[N, 1, h, w]`` per-pixel loss weights ``1 + weight * d / mean(d)``, ``d`` the distance of
    each pixel from the batch's median frame.

    Why: in a 32 px table scene the cube and the goal marker are a few pixels out of a thousand, so
    plain MSE is minimised by drawing the arm and the table and the keypoints never track the
    objects the policy needs. The median over a batch of frames is the static background; pixels
    away from it (objects, markers, the arm) are what moves between frames and get the weight.

    >>> t = torch.zeros(4, 3, 2, 2); t[0, :, 0, 0] = 1.0
    >>> foreground_weights(t, 3.0)[:, 0, 0, 0].tolist()
    [49.0, 1.0, 1.0, 1.0]
    """
    d = (target - target.median(dim=0, keepdim=True).values).abs().mean(dim=1, keepdim=True)
    return 1.0 + weight * d / d.mean().clamp_min(1e-8)


class SpatialAutoencoderLearner:
    """The :class:`~learner.algorithms.protocol.Algorithm` of encoder pretraining.

    A batch is ``{camera: uint8 [B, H, W, 3]}``; one update is one Adam step on the mean
    reconstruction MSE over the cameras (one decoder per camera, one shared encoder). With
    ``cfg.action_weight > 0`` (and ``actions`` given) the batch also holds ``"demo"``:
    ``{camera: uint8 [D, H, W, 3], "state": [D, S], "action": [D, A]}``, and the loss adds
    ``action_weight`` times the action head's MSE on it.
    """

    def __init__(
        self,
        encoder: nn.Module,
        feature_dim: int,
        cameras: list[str],
        cfg: AutoencoderConfig,
        actions: ActionTargets | None = None,
    ) -> None:
        self.encoder, self.cfg, self.cameras = encoder, cfg, list(cameras)
        th, tw = cfg.target_hw
        build = DECODERS.get(cfg.decoder)
        self.decoders = nn.ModuleDict({c: build(feature_dim, (th, tw)) for c in self.cameras})
        self.actions = actions if cfg.action_weight > 0 else None
        self.action_head: nn.Module | None = None
        if self.actions is not None:
            width = len(self.cameras) * feature_dim + int(self.actions.state_mean.numel())
            self.action_head = nn.Sequential(
                nn.Linear(width, cfg.action_hidden),
                nn.ReLU(),
                nn.Linear(cfg.action_hidden, cfg.action_hidden),
                nn.ReLU(),
                nn.Linear(cfg.action_hidden, self.actions.action_dim),
            )
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.updates = 0
        self._opt: torch.optim.Optimizer | None = None  # built on the first batch (lazy layers)

    def _params(self) -> list[nn.Parameter]:
        head = [] if self.action_head is None else list(self.action_head.parameters())
        return [*self.encoder.parameters(), *self.decoders.parameters(), *head]

    def _optimizer(self) -> torch.optim.Optimizer:
        if self._opt is None:
            self._opt = torch.optim.Adam(self._params(), lr=self.cfg.lr)
        return self._opt

    def action_loss(self, demo: dict[str, Tensor]) -> Tensor:
        """MSE of the demonstrated actions predicted from every camera's points + proprioception."""
        assert self.action_head is not None and self.actions is not None
        feats = [
            self.encoder(_shift(_unit(demo[c]), self.cfg.pad, self.generator)) for c in self.cameras
        ]
        state = (demo["state"].float() - self.actions.state_mean) / self.actions.state_std
        pred = self.action_head(torch.cat([*feats, state], dim=-1))
        return (pred - demo["action"].float()).square().mean()

    def losses(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        """``{"loss": total, "recon": ..., "action": ...}`` (``action`` only with the head)."""
        out = {"recon": self.reconstruction_loss(batch)}
        out["loss"] = out["recon"]
        if self.action_head is not None and "demo" in batch:
            out["action"] = self.action_loss(batch["demo"])
            out["loss"] = out["recon"] + self.cfg.action_weight * out["action"]
        return out

    def loss(self, batch: dict[str, Any]) -> Tensor:
        return self.losses(batch)["loss"]

    def reconstruction_loss(self, batch: dict[str, Any]) -> Tensor:
        losses = []
        for cam in self.cameras:
            x = _shift(_unit(batch[cam]), self.cfg.pad, self.generator)
            target = F.interpolate(x, size=self.cfg.target_hw, mode="area")
            recon = self.decoders[cam](self.encoder(x)).view_as(target)
            err = (recon - target).square()
            if self.cfg.foreground_weight > 0:
                w = foreground_weights(target, self.cfg.foreground_weight)
                losses.append((err * w).mean() / w.mean())
            else:
                losses.append(err.mean())
        return torch.stack(losses).mean()

    def update(self, batch: dict[str, Any]) -> dict[str, float]:
        self.encoder.train()
        losses = self.losses(batch)
        opt = self._optimizer()
        opt.zero_grad(set_to_none=True)
        losses["loss"].backward()
        norm = nn.utils.clip_grad_norm_(self._params(), self.cfg.grad_clip)
        opt.step()
        self.updates += 1
        metrics = {"loss": float(losses["loss"].detach()), "grad_norm": float(norm)}
        if "action" in losses:
            metrics["recon_loss"] = float(losses["recon"].detach())
            metrics["action_loss"] = float(losses["action"].detach())
        return metrics

    @torch.no_grad()
    def evaluate(self, batch: dict[str, Any]) -> float:
        """Reconstruction MSE of a held-out batch (no update)."""
        self.encoder.eval()
        return float(self.reconstruction_loss(batch))

    @torch.no_grad()
    def evaluate_actions(self, demo: dict[str, Tensor]) -> float:
        """Demo-action MSE of held-out demo steps (no update)."""
        self.encoder.eval()
        return float(self.action_loss(demo))

    def state_dict(self) -> dict[str, Any]:
        return {
            "encoder": self.encoder.state_dict(),
            "decoders": self.decoders.state_dict(),
            "action_head": None if self.action_head is None else self.action_head.state_dict(),
            "optimizer": None if self._opt is None else self._opt.state_dict(),
            "generator": self.generator.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.encoder.load_state_dict(state["encoder"])
        self.decoders.load_state_dict(state["decoders"])
        if self.action_head is not None and state.get("action_head") is not None:
            self.action_head.load_state_dict(state["action_head"])
        if state.get("optimizer") is not None:
            self._optimizer().load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])

    def policy(self) -> nn.Module:
        """The pretrained encoder: what ``model.encoder.weights`` loads."""
        return self.encoder
