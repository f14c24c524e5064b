"""A small vision-language-action model that learns on a CPU (models ``vla_tokens`` / ``vla_flow``).

    image (uint8, one camera) --> CNN trained here --FiLM(instruction)--> flatten --+
    instruction (string) --> frozen MiniLM (cached per string) --> projection -------+--> fusion MLP
    state --> running normaliser -----------------------------------------------------+      |
                       action head: 256-bin tokens (OpenVLA-style) | flow expert (pi0-style)
                       value head: MLP on the detached fused features (PPO's critic)

Why FiLM and a flattened conv map rather than a pooled one: grounding "the red cube" is
finding *where* the named colour is; FiLM lets the words pick the channels and the flatten
keeps their positions. Why a detached critic: the value loss must not move the features the
SFT stage taught the actor.

Same policy protocol as every learner model (``forward(obs) -> PolicyOutput``), so the PPO and
GRPO runners, checkpoints, ``rlinf eval`` and the policy server take it unchanged; the
instruction comes from ``obs["instruction"]`` (a list of strings). :meth:`VLAPolicy.sft_loss` is
the supervised objective of the SFT stage (token cross-entropy or flow matching).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from learner.models.encoders import RunningNorm, mlp
from learner.models.policy import Policy, PolicyOutput, PolicySpec
from learner.models.vla_ground import SlotCamera, SlotGlimpse, SlotPointer, slot_slices
from learner.models.vla_heads import FlowExpert, TokenHead
from learner.models.vla_text import get_text_encoder

HEAD_KINDS = ("tokens", "flow")


class FiLMConvEncoder(nn.Module):
    """uint8 ``[B, H, W, 3]`` -> ``[B, out_dim]``; the middle conv is FiLM-modulated by ``cond``."""

    def __init__(
        self,
        cond_dim: int,
        channels: tuple[int, ...] = (16, 32, 32),
        out_dim: int = 128,
        image_hw: tuple[int, int] = (64, 64),
    ) -> None:
        super().__init__()
        if len(channels) != 3:
            raise ValueError(
                f"model.cnn_channels must list 3 conv widths for the VLA encoder, got {channels}"
            )
        c1, c2, c3 = channels
        self.conv1 = nn.Conv2d(3, c1, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(c2, c3, 3, stride=2, padding=1)
        self.film = nn.Linear(cond_dim, 2 * c2)
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)
        h, w = (math.ceil(image_hw[0] / 8), math.ceil(image_hw[1] / 8))
        self.proj = nn.Sequential(nn.Linear(c3 * h * w, out_dim), nn.ReLU())

    def forward(self, image: Tensor, cond: Tensor) -> Tensor:
        return self.encode(image, cond)[0]

    def encode(self, image: Tensor, cond: Tensor) -> tuple[Tensor, Tensor]:
        """Image features and the first conv layer's map ``[B, c1, H/2, W/2]`` (for slot
        glimpses)."""
        x = image.permute(0, 3, 1, 2).float() / 255.0 - 0.5
        first = torch.relu(self.conv1(x))
        gamma, beta = self.film(cond).chunk(2, dim=-1)
        x = torch.relu(self.conv2(first) * (1.0 + gamma[:, :, None, None]) + beta[:, :, None, None])
        x = torch.relu(self.conv3(x))
        return self.proj(x.flatten(1)), first


class VLAPolicy(Policy):
    """See the module docstring; ``head`` is ``tokens`` or ``flow``."""

    def __init__(
        self,
        spec: PolicySpec,
        head: str = "tokens",
        hidden: list[int] | tuple[int, ...] = (256, 256),
        text_encoder: str = "minilm",
        text_dim: int = 64,
        cnn_channels: tuple[int, ...] = (16, 32, 32),
        image_feat_dim: int = 128,
        normalize_state: bool = True,
        n_bins: int = 256,
        flow_steps: int = 4,
        flow_hidden: int = 256,
        init_log_sigma: float = math.log(0.3),
        slot_pointer: bool = False,
        slot_camera: dict[str, Any] | None = None,
        token_temperature: float = 1.0,
        flow_x0: str = "gaussian",
        **_: Any,
    ) -> None:
        super().__init__()
        if head not in HEAD_KINDS:
            raise ValueError(f"VLA head {head!r}; use one of {HEAD_KINDS}")
        if len(spec.cameras) != 1:
            raise ValueError(
                f"the small VLA reads exactly one camera, the env spec has {sorted(spec.cameras)}; "
                "set env.kwargs.cameras to one camera and env.obs_mode to state+rgb"
            )
        self.spec, self.head_kind, self.text_encoder_name = spec, head, text_encoder
        self.camera = next(iter(spec.cameras))
        # not ``self.norm``: the RL actor folds rollout states into a policy's ``norm`` every
        # iteration, which would move an SFT policy's inputs under it; these stats come from the
        # SFT demos (update_normalizer) and stay fixed through RL
        self.state_norm = RunningNorm(spec.state_dim) if normalize_state else None
        # sentence embeddings of templated instructions differ in a few directions only ("red" vs
        # "blue" moves a 384-d unit vector a little): standardising each dimension over the SFT
        # instructions turns those differences into unit-scale inputs (fixed after SFT, like
        # state_norm)
        self.text_norm = RunningNorm(get_text_encoder(text_encoder).dim, clip=5.0)
        self.text_proj = nn.Sequential(
            nn.Linear(get_text_encoder(text_encoder).dim, text_dim), nn.Tanh()
        )
        self.cnn = FiLMConvEncoder(
            text_dim, tuple(cnn_channels), image_feat_dim, tuple(spec.cameras[self.camera])
        )
        # off by default so checkpoints saved before it load unchanged; the language configs turn it
        # on
        self.pointer: SlotPointer | None = None
        if slot_pointer:
            slices = slot_slices(spec.robot)
            if len(slices) < 2:
                raise ValueError(
                    "model.kwargs.slot_pointer=true needs an env whose state has >= 2 "
                    f"obj*_minus_ee fields (franka_language); this spec has {len(slices)}"
                )
            glimpse, ee = None, None
            if slot_camera is not None:
                ee_field = spec.robot.state_slices().get(
                    "ee_pos"
                )  # a robot: slot_slices found slots
                if ee_field is None:
                    raise ValueError(
                        "model.kwargs.slot_camera needs an env whose state has an ee_pos field"
                    )
                glimpse = SlotGlimpse(
                    SlotCamera.from_config(dict(slot_camera)),
                    tuple(spec.cameras[self.camera]),
                    int(cnn_channels[0]),
                )
                ee = (ee_field.start, ee_field.stop)
            self.pointer = SlotPointer(
                slices, text_dim + image_feat_dim, glimpse=glimpse, text_dim=text_dim, ee_slice=ee
            )
        elif slot_camera is not None:
            raise ValueError(
                "model.kwargs.slot_camera is the slot pointer's camera: set slot_pointer=true too"
            )
        hidden = list(hidden)
        self.fusion = mlp(
            spec.state_dim + text_dim + image_feat_dim + (3 if slot_pointer else 0),
            hidden,
            activation=nn.ReLU,
        )
        feat = hidden[-1]
        self.critic = nn.Sequential(nn.Linear(feat, 128), nn.Tanh(), nn.Linear(128, 1))
        if head == "tokens":
            self.head: nn.Module = TokenHead(
                feat, spec.action_dim, spec.chunk, n_bins, token_temperature
            )
        else:
            self.head = FlowExpert(
                feat, spec.action_dim, spec.chunk, flow_hidden, flow_steps, init_log_sigma, flow_x0
            )

    def _text(self, obs: dict[str, Any], batch: int) -> Tensor:
        texts = list(obs.get("instruction") or [])
        if len(texts) != batch:
            raise ValueError(
                f"the VLA needs one instruction per sample in obs['instruction']: got {len(texts)} "
                f"for a batch of {batch}"
            )
        return get_text_encoder(self.text_encoder_name).encode(texts).to(obs["state"].device)

    def features(self, obs: dict[str, Any]) -> Tensor:
        return self._features(obs)[0]

    def _features(self, obs: dict[str, Any]) -> tuple[Tensor, Tensor | None]:
        """Fused features and the slot pointer's weights (``None`` without a pointer)."""
        raw = obs["state"].float()
        state = self.state_norm(raw) if self.state_norm is not None else raw
        if self.camera not in obs.get("images", {}):
            raise KeyError(f"observation lacks camera {self.camera!r}; the VLA was built for it")
        text = self.text_proj(self.text_norm(self._text(obs, state.shape[0])))
        image = obs["images"][self.camera]
        img, first = self.cnn.encode(image, text)
        parts, weights = [state, text, img], None
        if self.pointer is not None:
            chosen, weights = self.pointer(raw, torch.cat([text, img], dim=-1), text, image, first)
            parts.append(chosen)
        return self.fusion(torch.cat(parts, dim=-1)), weights

    def slot_weights(self, obs: dict[str, Any]) -> Tensor:
        """``[B, n_slots]``: which object the pointer reads the instruction as naming (diagnostics,
        tests)."""
        if self.pointer is None:
            raise ValueError("this VLA has no slot pointer (model.kwargs.slot_pointer=false)")
        with torch.no_grad():
            return self._features(obs)[1]

    def forward(self, obs: dict[str, Any]) -> PolicyOutput:
        feat = self.features(obs)
        value = self.critic(feat.detach()).squeeze(-1)
        return PolicyOutput(dist=self.head(feat), value=value)

    def sft_loss(self, obs: dict[str, Any], actions: Tensor) -> Tensor:
        """Supervised loss on demonstrated chunks ``[B, chunk, A]``: token CE or flow matching."""
        feat = self.features(obs)
        if self.head_kind == "tokens":
            return self.head(feat).sft_loss(actions)
        return self.head.sft_loss(feat, actions)

    def update_normalizer(self, states: Tensor, instructions: list[str] | None = None) -> None:
        """Fold SFT data into the state (and instruction-embedding) statistics."""
        if self.state_norm is not None:
            self.state_norm.update(states)
        if instructions:
            self.text_norm.update(get_text_encoder(self.text_encoder_name).encode(instructions))
