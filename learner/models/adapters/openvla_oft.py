"""OpenVLA-OFT: the OpenVLA network decoding a whole action chunk in parallel, with an L1 head.

What OFT changes (Kim et al. 2025, restated): after ``BOS, patches, proprio, prompt`` the input
gets ``chunk * A`` placeholder tokens and a stop token, attention is *bidirectional*, and the
last hidden states at the placeholders, regrouped per time step ([B, chunk, A * D]), go through
an MLP-ResNet regression head trained with an L1 loss: continuous actions, one forward pass per
chunk (8 steps on LIBERO). Proprioception enters as one token from ``proprio_projector``.
Parameter names follow the released weights: the OpenVLA layout of :mod:`.openvla`, plus
``action_head.model.{layer_norm1, fc1, mlp_resnet_blocks.N.ffn.{0,1}, layer_norm2, fc2}`` and
``proprio_projector.{fc1, fc2}`` (OFT ships these two as separate files; merge them under
these prefixes into one safetensors file). Statistics: ``bounds_q99`` as OpenVLA.

Log-probs for RL: an L1 regression head is the mean of a Laplace distribution; we score
actions under ``Laplace(head output, l1_scale)`` per dimension and sample from it when
exploring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from learner.models.adapters import ADAPTERS
from learner.models.adapters.common import (
    ActOutput,
    ByteTokenizer,
    VlaAdapter,
    add_lora,
    hf_tokenizer,
)
from learner.models.adapters.normalization import normalize, unnormalize
from learner.models.adapters.openvla import (
    OpenVlaConfig,
    PrismaticVla,
    observation_images,
    openvla_prompt,
)


@dataclass
class OftConfig:
    vla: OpenVlaConfig = field(default_factory=OpenVlaConfig)
    chunk: int = field(default=8, metadata={"help": "actions per chunk (OFT LIBERO: 8)"})
    head_hidden: int = field(
        default=4096, metadata={"help": "MLP-ResNet width (OFT: the LM width)"}
    )
    head_blocks: int = 2
    use_proprio: bool = True
    l1_scale: float = field(
        default=0.05, metadata={"help": "Laplace scale of the RL policy around the L1 head"}
    )
    stop_id: int = field(default=2, metadata={"help": "token after the placeholders (the EOS id)"})
    norm_stats_state: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "proprio statistics {q01, q99} (bounds_q99); empty: state passed as is"},
    )

    @classmethod
    def tiny(cls, **vla_kw: Any) -> OftConfig:
        return cls(vla=OpenVlaConfig.tiny(**vla_kw), chunk=4, head_hidden=64)


class MLPResNetBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ffn = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ffn(x)


class MLPResNet(nn.Module):
    def __init__(self, blocks: int, input_dim: int, hidden: int, output_dim: int) -> None:
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(input_dim)
        self.fc1 = nn.Linear(input_dim, hidden)
        self.mlp_resnet_blocks = nn.ModuleList(MLPResNetBlock(hidden) for _ in range(blocks))
        self.layer_norm2 = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, output_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(self.layer_norm1(x)))
        for blk in self.mlp_resnet_blocks:
            x = blk(x)
        return self.fc2(self.layer_norm2(x))


class L1RegressionActionHead(nn.Module):
    def __init__(self, llm_dim: int, action_dim: int, hidden: int, blocks: int) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.model = MLPResNet(blocks, llm_dim * action_dim, hidden, action_dim)

    def forward(self, hidden: torch.Tensor, chunk: int) -> torch.Tensor:
        """[B, chunk * A, D] placeholder states -> [B, chunk, A] actions."""
        return self.model(hidden.reshape(hidden.shape[0], chunk, -1))


class ProprioProjector(nn.Module):
    def __init__(self, llm_dim: int, state_dim: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(state_dim, llm_dim), nn.Linear(llm_dim, llm_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(nn.functional.gelu(self.fc1(x)))


class OpenVlaOftAdapter(PrismaticVla, VlaAdapter):
    fsdp_forward_methods = ("mean_actions",)  # act, log_prob and l1_loss all run the net here

    def __init__(self, cfg: OftConfig) -> None:
        super().__init__(cfg.vla)
        self.cfg, v = cfg, cfg.vla
        self.chunk, self.action_dim, self.state_dim = cfg.chunk, v.action_dim, v.state_dim
        self.cameras, self.image_size = v.cameras, v.image_size
        d = v.llm.hidden
        self.action_head = L1RegressionActionHead(d, v.action_dim, cfg.head_hidden, cfg.head_blocks)
        self.proprio_projector = ProprioProjector(d, v.state_dim) if cfg.use_proprio else None
        if v.checkpoint:
            self.load_state_dict_file(v.checkpoint)
        self.stats = v.action_stats()
        self.tokenizer = hf_tokenizer(v.tokenizer) if v.tokenizer else ByteTokenizer()
        for p in [
            *self.vision_backbone.parameters(),
            *self.projector.parameters(),
            *self.language_model.parameters(),
        ]:
            p.requires_grad_(False)
        self.language_model = add_lora(
            self.language_model, v.lora
        )  # the head and projector train fully

    def mean_actions(self, obs: dict[str, Any]) -> torch.Tensor:
        """The L1 head's chunk [B, chunk, A] in model units (one bidirectional forward)."""
        instr = list(obs.get("instruction") or [""] * len(obs["state"]))
        ids = [openvla_prompt(self.tokenizer, s, bool(self.cfg.vla.tokenizer)) for s in instr]
        patches = self.patches(observation_images(self.cfg.vla, obs).to(self.device, self.dtype))
        extra = None
        if self.proprio_projector is not None:
            state = np.asarray(obs["state"], dtype=np.float64)
            if self.cfg.norm_stats_state:
                state = normalize("bounds_q99", state, self.cfg.norm_stats_state)
            extra = self.proprio_projector(
                torch.as_tensor(state, dtype=self.dtype, device=self.device)
            )[:, None]
        embeds, mask = self.embed(ids, patches, extra)
        n_act = self.chunk * self.action_dim
        emb = self.language_model.get_input_embeddings()
        tail = torch.tensor(
            [1] * n_act + [self.cfg.stop_id], device=self.device
        )  # placeholders, then the stop token
        embeds = torch.cat([embeds, emb(tail)[None].expand(len(ids), -1, -1)], 1)
        mask = torch.cat(
            [mask, torch.ones(len(ids), n_act + 1, dtype=mask.dtype, device=mask.device)], 1
        )
        hidden = self.run(embeds, mask, bidirectional=True).hidden_states[-1]
        # scored in float32; a copy, not the head's reshaped view: FSDP hooks this output
        return self.action_head(hidden[:, -n_act - 1 : -1], self.chunk).to(torch.float32, copy=True)

    def act(self, obs: dict[str, Any], deterministic: bool = True, **kw: Any) -> ActOutput:
        mean = self.mean_actions(obs)
        dist = torch.distributions.Laplace(mean, self.cfg.l1_scale)
        model = mean if deterministic else dist.sample()
        logp = dist.log_prob(model).flatten(1).sum(-1)
        m = model.detach().cpu().numpy()
        robot = unnormalize("bounds_q99", np.clip(m, -1.0, 1.0), self.stats)
        return ActOutput(
            robot.astype(np.float32),
            logp.detach().cpu().numpy(),
            {"actions": model.detach().cpu()},
            m.astype(np.float32),
        )

    def log_prob(self, obs: dict[str, Any], extras: dict[str, torch.Tensor]) -> torch.Tensor:
        dist = torch.distributions.Laplace(self.mean_actions(obs), self.cfg.l1_scale)
        return (
            dist.log_prob(torch.as_tensor(extras["actions"], dtype=torch.float32).to(self.device))
            .flatten(1)
            .sum(-1)
        )

    def l1_loss(self, obs: dict[str, Any], actions: np.ndarray) -> torch.Tensor:
        """OFT's training loss against robot-unit target chunks [B, chunk, A] (SFT)."""
        target = torch.as_tensor(
            normalize("bounds_q99", actions, self.stats), dtype=torch.float32, device=self.device
        )
        return (self.mean_actions(obs) - target).abs().mean()


@ADAPTERS.register("openvla_oft")
def _oft(cfg: OftConfig | None = None) -> OpenVlaOftAdapter:
    return OpenVlaOftAdapter(cfg or OftConfig())
