"""OpenVLA: fused DINOv2 + SigLIP patches -> Llama 2 -> 7 action tokens (chunk 1), LoRA for RL.

Layout of the released ``openvla/openvla-7b`` weights, reproduced at any size by
:class:`PrismaticVla`: ``vision_backbone.featurizer.*`` (DINOv2-reg ViT, timm names),
``vision_backbone.fused_featurizer.*`` (SigLIP ViT), ``projector.fc1/fc2/fc3`` (the fused GELU
MLP from concatenated patch features to the LM width), ``language_model.model.*`` and
``language_model.lm_head`` (Llama). The sequence is ``BOS, patches, prompt`` with the prompt
``In: What action should the robot take to {instruction}?\nOut:``; the 7 action tokens are
decoded greedily (or sampled, for RL) from the *last 256 ids* of the tokenizer's vocabulary,
restricted to those ids, so the log-prob of an action is a sum of 7 log-softmaxes over 256
bins. Tokens -> bin centres (:mod:`.action_tokens`) -> robot units with the dataset's
q01 / q99 (:mod:`.normalization`, ``bounds_q99``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from learner.models.adapters import ADAPTERS, require
from learner.models.adapters.action_tokens import ActionTokenizer
from learner.models.adapters.common import (
    ActOutput,
    ByteTokenizer,
    LoraSpec,
    VlaAdapter,
    add_lora,
    hf_tokenizer,
    images_tensor,
)
from learner.models.adapters.normalization import normalize, unnormalize
from learner.models.adapters.vit import TimmVit, VitConfig

PROMPT = "In: What action should the robot take to {instruction}?\nOut:"
EMPTY_TOKEN = (
    29871  # Llama 2's "▁": OpenVLA's prompts end with it at training time, so inference appends it
)


def openvla_prompt(tokenizer: Any, instruction: str, real_tokenizer: bool) -> list[int]:
    """Prompt ids (BOS first); with the checkpoint's Llama tokenizer, ending in the empty token."""
    ids = list(tokenizer(PROMPT.format(instruction=(instruction or "").strip().lower())))
    if real_tokenizer and ids[-1] != EMPTY_TOKEN:
        ids.append(EMPTY_TOKEN)
    return ids


# per-backbone pixel statistics (ImageNet for DINOv2, 0.5 / 0.5 for SigLIP), as OpenVLA's
# processor uses
DINO_MEAN, DINO_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
SIGLIP_MEAN, SIGLIP_STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)


@dataclass
class LlmConfig:
    hidden: int = 4096
    layers: int = 32
    heads: int = 32
    kv_heads: int = 32
    intermediate: int = 11008
    vocab: int = 32064  # the model's (padded) vocabulary
    tokenizer_vocab: int = 32000  # the tokenizer's: action tokens are its last 256 ids


@dataclass
class OpenVlaConfig:
    """Sizes default to the released 7B model; :meth:`tiny` is a random-weight CPU version."""

    image_size: int = 224
    dino: VitConfig = field(
        default_factory=lambda: VitConfig(224, 14, 1024, 24, 16, 4.0, True, 4, True)
    )
    siglip: VitConfig = field(
        default_factory=lambda: VitConfig(224, 14, 1152, 27, 16, 3.7362, False, 0, False)
    )
    llm: LlmConfig = field(default_factory=LlmConfig)
    action_dim: int = 7
    state_dim: int = 8  # not read by OpenVLA (announced in the raw spec); OFT projects it
    cameras: tuple[str, ...] = ("primary",)
    norm_stats: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "action statistics {q01, q99, mask}; empty: read norm_stats_path"},
    )
    norm_stats_path: str = field(
        default="", metadata={"help": "dataset_statistics.json of the checkpoint"}
    )
    unnorm_key: str = field(
        default="", metadata={"help": "dataset in dataset_statistics.json (e.g. bridge_orig)"}
    )
    checkpoint: str = field(
        default="", metadata={"help": "safetensors file with the real key names ('' = random)"}
    )
    tokenizer: str = field(
        default="", metadata={"help": "checkpoint directory with the tokenizer ('' = bytes)"}
    )
    lora: LoraSpec = field(default_factory=LoraSpec)

    @classmethod
    def tiny(cls, **kw: Any) -> OpenVlaConfig:
        base: dict[str, Any] = dict(
            image_size=32,
            dino=VitConfig(32, 8, 32, 3, 4, 2.0, True, 4, True),
            siglip=VitConfig(32, 8, 24, 3, 4, 2.0, False, 0, False),
            llm=LlmConfig(
                hidden=64,
                layers=2,
                heads=4,
                kv_heads=4,
                intermediate=128,
                vocab=576,
                tokenizer_vocab=512,
            ),
            lora=LoraSpec(rank=4, alpha=8),
        )
        base.update(kw)
        return cls(**base)

    def action_stats(self) -> dict[str, Any]:
        if self.norm_stats:
            return self.norm_stats
        if not self.norm_stats_path:
            raise ValueError("OpenVLA needs action statistics: set norm_stats or norm_stats_path")
        data = json.loads(Path(self.norm_stats_path).read_text())
        key = self.unnorm_key or (next(iter(data)) if len(data) == 1 else "")
        if key not in data:
            raise ValueError(
                f"unnorm_key {self.unnorm_key!r} is not in {self.norm_stats_path} (has "
                f"{sorted(data)})"
            )
        return data[key]["action"]


class FusedProjector(nn.Module):
    def __init__(self, vision_dim: int, llm_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(vision_dim, 4 * vision_dim)
        self.fc2 = nn.Linear(4 * vision_dim, llm_dim)
        self.fc3 = nn.Linear(llm_dim, llm_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(nn.functional.gelu(self.fc2(nn.functional.gelu(self.fc1(x)))))


class PrismaticVla(nn.Module):
    """The OpenVLA network with the released checkpoint's parameter names (adapters inherit it,
    so their own ``state_dict`` keys are the checkpoint's)."""

    def __init__(self, cfg: OpenVlaConfig) -> None:
        super().__init__()
        transformers = require("transformers")
        self.vision_backbone = nn.ModuleDict(
            {"featurizer": TimmVit(cfg.dino), "fused_featurizer": TimmVit(cfg.siglip)}
        )
        self.projector = FusedProjector(cfg.dino.dim + cfg.siglip.dim, cfg.llm.hidden)
        lc = cfg.llm
        self.language_model = transformers.LlamaForCausalLM(
            transformers.LlamaConfig(
                vocab_size=lc.vocab,
                hidden_size=lc.hidden,
                intermediate_size=lc.intermediate,
                num_hidden_layers=lc.layers,
                num_attention_heads=lc.heads,
                num_key_value_heads=lc.kv_heads,
                max_position_embeddings=4096,
                pad_token_id=0,
                bos_token_id=1,
                eos_token_id=2,
            )
        )

    def patches(self, images: torch.Tensor) -> torch.Tensor:
        """[B, 3, S, S] raw-normalised-to-[0,1]-then-per-backbone images -> projected patches
        [B, N, D]."""
        dino = self.vision_backbone["featurizer"](images[:, 0])
        sig = self.vision_backbone["fused_featurizer"](images[:, 1])
        return self.projector(torch.cat([dino, sig], -1))

    def embed(
        self, ids: list[list[int]], patches: torch.Tensor, extra: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``BOS, patches, [extra tokens], prompt`` per sample, left-padded:
        (embeds [B, L, D], mask [B, L])."""
        emb = self.language_model.get_input_embeddings()
        seqs = []
        for i, s in enumerate(ids):
            t = emb(torch.tensor(s, dtype=torch.long, device=patches.device))
            parts = [t[:1], patches[i]] + ([extra[i]] if extra is not None else []) + [t[1:]]
            seqs.append(torch.cat(parts, 0))
        n = max(len(s) for s in seqs)
        out = patches.new_zeros(len(seqs), n, patches.shape[-1])
        mask = torch.zeros(len(seqs), n, dtype=torch.long, device=patches.device)
        for i, s in enumerate(seqs):
            out[i, n - len(s) :] = s
            mask[i, n - len(s) :] = 1
        return out, mask

    def run(self, embeds: torch.Tensor, mask: torch.Tensor, bidirectional: bool = False) -> Any:
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        attn: torch.Tensor = mask
        if bidirectional:  # OFT's parallel decoding: every token sees every real token
            attn = torch.zeros(
                mask.shape[0],
                1,
                mask.shape[1],
                mask.shape[1],
                dtype=embeds.dtype,
                device=embeds.device,
            )
            attn = attn.masked_fill(mask[:, None, None, :] == 0, torch.finfo(embeds.dtype).min)
        return self.language_model(
            inputs_embeds=embeds,
            attention_mask=attn,
            position_ids=pos,
            output_hidden_states=bidirectional,
        )


def observation_images(cfg: OpenVlaConfig, obs: dict[str, Any]) -> torch.Tensor:
    """The primary camera, prepared twice (DINOv2 and SigLIP statistics): [B, 2, 3, S, S]."""
    dino = images_tensor(obs, cfg.cameras[:1], cfg.image_size, DINO_MEAN, DINO_STD)[:, 0]
    sig = images_tensor(obs, cfg.cameras[:1], cfg.image_size, SIGLIP_MEAN, SIGLIP_STD)[:, 0]
    return torch.stack([dino, sig], 1)


class OpenVlaAdapter(PrismaticVla, VlaAdapter):
    """OpenVLA behind the adapter interface; LoRA on the language model is what RL trains."""

    def __init__(self, cfg: OpenVlaConfig) -> None:
        super().__init__(cfg)
        self.cfg = cfg
        self.chunk, self.action_dim, self.state_dim = 1, cfg.action_dim, cfg.state_dim
        self.cameras, self.image_size = cfg.cameras, cfg.image_size
        if cfg.checkpoint:
            self.load_state_dict_file(cfg.checkpoint)
        self.tokens = ActionTokenizer(cfg.llm.tokenizer_vocab)
        self.stats = cfg.action_stats()
        self.tokenizer = hf_tokenizer(cfg.tokenizer) if cfg.tokenizer else ByteTokenizer()
        for p in self.parameters():
            p.requires_grad_(False)
        self.language_model = add_lora(self.language_model, cfg.lora)

    def _prompt(self, obs: dict[str, Any]) -> tuple[list[list[int]], torch.Tensor]:
        instr = list(obs.get("instruction") or [""] * len(obs["state"]))
        ids = [openvla_prompt(self.tokenizer, s, bool(self.cfg.tokenizer)) for s in instr]
        return ids, self.patches(observation_images(self.cfg, obs).to(self.device, self.dtype))

    def _action_logits(self, logits: torch.Tensor) -> torch.Tensor:
        return logits[..., self.tokens.first_id : self.cfg.llm.tokenizer_vocab]

    def act(self, obs: dict[str, Any], deterministic: bool = True, **kw: Any) -> ActOutput:
        ids, patches = self._prompt(obs)
        embeds, mask = self.embed(ids, patches)
        emb = self.language_model.get_input_embeddings()
        bins, logp = [], torch.zeros(len(ids), device=self.device)
        for _ in range(self.action_dim):  # autoregressive, one token per action dimension
            logits = self._action_logits(self.run(embeds, mask).logits[:, -1])
            lp = torch.log_softmax(logits.float(), -1)
            b = (
                lp.argmax(-1)
                if deterministic
                else torch.distributions.Categorical(logits=lp).sample()
            )
            logp = logp + lp.gather(-1, b[:, None])[:, 0]
            bins.append(b)
            tok = b + self.tokens.first_id
            embeds = torch.cat([embeds, emb(tok)[:, None]], 1)
            mask = torch.cat(
                [mask, torch.ones(len(ids), 1, dtype=mask.dtype, device=mask.device)], 1
            )
        token_ids = (torch.stack(bins, 1) + self.tokens.first_id).cpu().numpy()
        model = self.tokens.decode(token_ids)[:, None, :]
        robot = unnormalize("bounds_q99", model, self.stats)
        return ActOutput(
            robot.astype(np.float32),
            logp.detach().cpu().numpy(),
            {"tokens": torch.as_tensor(token_ids)},
            model.astype(np.float32),
        )

    def log_prob(self, obs: dict[str, Any], extras: dict[str, torch.Tensor]) -> torch.Tensor:
        """Teacher-forced log-prob [B] of ``extras["tokens"]`` [B, 7] (one forward,
        differentiable)."""
        tokens = torch.as_tensor(extras["tokens"], dtype=torch.long).to(self.device)
        ids, patches = self._prompt(obs)
        embeds, mask = self.embed(ids, patches)
        emb = self.language_model.get_input_embeddings()
        embeds = torch.cat([embeds, emb(tokens[:, :-1])], 1)
        mask = torch.cat(
            [
                mask,
                torch.ones(
                    tokens.shape[0], tokens.shape[1] - 1, dtype=mask.dtype, device=mask.device
                ),
            ],
            1,
        )
        logits = self._action_logits(self.run(embeds, mask).logits[:, -tokens.shape[1] :])
        lp = torch.log_softmax(logits.float(), -1)
        return lp.gather(-1, (tokens - self.tokens.first_id)[..., None])[..., 0].sum(-1)

    def tokens_for(self, actions: np.ndarray) -> torch.Tensor:
        """Robot-unit actions [B, A] -> their action tokens [B, A] (SFT targets)."""
        return torch.as_tensor(self.tokens.encode(normalize("bounds_q99", actions, self.stats)))


@ADAPTERS.register("openvla")
def _openvla(cfg: OpenVlaConfig | None = None) -> OpenVlaAdapter:
    return OpenVlaAdapter(cfg or OpenVlaConfig())
