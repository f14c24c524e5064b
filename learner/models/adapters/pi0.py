"""π0 and π0.5: a PaliGemma prefix and a Gemma action expert that denoises a 50-step action chunk.

Layout (openpi's PyTorch port, restated): ``paligemma_with_expert.paligemma.*`` is a
``transformers`` PaliGemma (SigLIP ``model.vision_tower``, ``model.multi_modal_projector.linear``,
Gemma ``model.language_model``, ``lm_head``); ``paligemma_with_expert.gemma_expert.model.*`` the
action expert (same heads and head size, narrower); ``action_in_proj`` / ``action_out_proj`` map
the (zero-padded, 32-wide) action rows in and out of the expert. π0 adds ``state_proj`` (the
state as one suffix token) and ``action_time_mlp_in/out`` (action token ⊕ sin-cos time
embedding); π0.5 drops both: the state is discretised into 256 bins and written into the prompt,
and the time embedding goes through ``time_mlp_in/out`` into the expert's adaRMS norms.

Sequence and attention (openpi's block rule, :func:`.gemma_joint.block_mask`): prefix
``images, prompt`` is one bidirectional block; the suffix is ``[state], actions``, each a new
block (actions see everything before them and each other). Flow convention and RTC guidance:
:mod:`.flow`. Normalisation: π0 ``mean_std``, π0.5 ``quantile`` (:mod:`.normalization`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from learner.models.adapters import ADAPTERS, flow, require
from learner.models.adapters.common import (
    ActOutput,
    ByteTokenizer,
    LoraSpec,
    VlaAdapter,
    hf_tokenizer,
    images_tensor,
)
from learner.models.adapters.gemma_joint import AdaRMSNorm, block_mask, prefix_pass, suffix_pass
from learner.models.adapters.normalization import normalize, unnormalize

# openpi's checkpoints were converted with an older transformers whose SigLIP sat under
# ``vision_model``
KEY_RENAMES = (("vision_tower.vision_model.", "vision_tower."),)


@dataclass
class GemmaSize:
    width: int
    depth: int
    mlp: int
    heads: int = 8
    kv_heads: int = 1
    head_dim: int = 256


@dataclass
class Pi0Config:
    """Sizes default to the released π0 (PaliGemma 2B + 300M expert); :meth:`tiny` for CPUs."""

    pi05: bool = field(
        default=False,
        metadata={"help": "π0.5: discrete state in the prompt, adaRMS time, quantile norm"},
    )
    image_size: int = 224
    vision_width: int = 1152
    vision_depth: int = 27
    vision_mlp: int = 4304
    vision_heads: int = 16
    patch: int = 14
    vlm: GemmaSize = field(default_factory=lambda: GemmaSize(2048, 18, 16384))
    expert: GemmaSize = field(default_factory=lambda: GemmaSize(1024, 18, 4096))
    vocab: int = 257152
    chunk: int = field(default=50, metadata={"help": "action horizon (openpi: 50)"})
    model_action_dim: int = field(
        default=32, metadata={"help": "padded action / state width inside the model"}
    )
    action_dim: int = 7
    state_dim: int = 8
    cameras: tuple[str, ...] = ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")
    num_steps: int = field(default=10, metadata={"help": "Euler steps of the sampler"})
    sigma: float = field(
        default=0.1, metadata={"help": "noise injected per step for RL log-probs (0: ODE)"}
    )
    norm_stats: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": (
                "{state: {...}, actions: {...}} as openpi's norm_stats.json (mean/std for π0, "
                "q01/q99 for π0.5)"
            )
        },
    )
    checkpoint: str = field(
        default="", metadata={"help": "safetensors file with the real key names ('' = random)"}
    )
    tokenizer: str = field(
        default="", metadata={"help": "directory with the PaliGemma tokenizer ('' = bytes)"}
    )
    lora: LoraSpec = field(default_factory=lambda: LoraSpec(rank=16, alpha=16))
    max_guidance: float = field(default=5.0, metadata={"help": "RTC guidance weight cap (beta)"})

    @classmethod
    def tiny(cls, **kw: Any) -> Pi0Config:
        base = dict(
            image_size=32,
            vision_width=32,
            vision_depth=2,
            vision_mlp=64,
            vision_heads=4,
            patch=8,
            vlm=GemmaSize(64, 2, 128, 4, 1, 16),
            expert=GemmaSize(48, 2, 96, 4, 1, 16),
            vocab=600,
            chunk=10,
            model_action_dim=8,
            cameras=("base_0_rgb",),
            num_steps=5,
            lora=LoraSpec(rank=4, alpha=8),
        )
        base.update(kw)
        return cls(**base)

    @property
    def scheme(self) -> str:
        return "quantile" if self.pi05 else "mean_std"


def posemb_sincos(
    t: torch.Tensor, dim: int, min_period: float = 4e-3, max_period: float = 4.0
) -> torch.Tensor:
    """openpi's sine-cosine embedding of the flow time [B] -> [B, dim]."""
    frac = torch.linspace(0.0, 1.0, dim // 2, dtype=torch.float64, device=t.device)
    period = min_period * (max_period / min_period) ** frac
    x = t.double()[:, None] * (2 * math.pi / period)[None]
    return torch.cat([x.sin(), x.cos()], -1).float()


class PaliGemmaWithExpert(nn.Module):
    def __init__(self, cfg: Pi0Config) -> None:
        super().__init__()
        tf = require("transformers")

        def gemma(size: GemmaSize, vocab: int) -> Any:
            return tf.GemmaConfig(
                vocab_size=vocab,
                hidden_size=size.width,
                intermediate_size=size.mlp,
                num_hidden_layers=size.depth,
                num_attention_heads=size.heads,
                num_key_value_heads=size.kv_heads,
                head_dim=size.head_dim,
            )

        vision = tf.SiglipVisionConfig(
            hidden_size=cfg.vision_width,
            intermediate_size=cfg.vision_mlp,
            num_hidden_layers=cfg.vision_depth,
            num_attention_heads=cfg.vision_heads,
            image_size=cfg.image_size,
            patch_size=cfg.patch,
            vision_use_head=False,
        )
        self.paligemma = tf.PaliGemmaForConditionalGeneration(
            tf.PaliGemmaConfig(
                vision_config=vision.to_dict(),
                text_config=gemma(cfg.vlm, cfg.vocab).to_dict(),
                projection_dim=cfg.vlm.width,
            )
        )
        self.gemma_expert = tf.GemmaForCausalLM(gemma(cfg.expert, 8))
        self.gemma_expert.model.embed_tokens = None  # the expert reads embeddings, never token ids
        self.gemma_expert.lm_head = None
        if cfg.pi05:
            m = self.gemma_expert.model
            for layer in m.layers:
                layer.input_layernorm = AdaRMSNorm(cfg.expert.width, cfg.expert.width)
                layer.post_attention_layernorm = AdaRMSNorm(cfg.expert.width, cfg.expert.width)
            m.norm = AdaRMSNorm(cfg.expert.width, cfg.expert.width)


class Pi0Adapter(VlaAdapter):
    key_renames = KEY_RENAMES
    fsdp_forward_methods = ("act", "log_prob", "flow_loss")
    fsdp_piecewise = ("GemmaDecoderLayer",)  # gemma_joint runs their projections itself

    def __init__(self, cfg: Pi0Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.chunk, self.action_dim, self.state_dim = cfg.chunk, cfg.action_dim, cfg.state_dim
        self.cameras, self.image_size = cfg.cameras, cfg.image_size
        self.paligemma_with_expert = PaliGemmaWithExpert(cfg)
        w, a = cfg.expert.width, cfg.model_action_dim
        self.action_in_proj, self.action_out_proj = nn.Linear(a, w), nn.Linear(w, a)
        if cfg.pi05:
            self.time_mlp_in, self.time_mlp_out = nn.Linear(w, w), nn.Linear(w, w)
        else:
            self.state_proj = nn.Linear(a, w)
            self.action_time_mlp_in, self.action_time_mlp_out = nn.Linear(2 * w, w), nn.Linear(w, w)
        if cfg.checkpoint:
            self.load_state_dict_file(cfg.checkpoint)
        self.tokenizer = hf_tokenizer(cfg.tokenizer) if cfg.tokenizer else ByteTokenizer()
        self._lora()

    def _lora(self) -> None:
        """Freeze the two Gemmas and SigLIP; LoRA in both Gemmas; the projections train fully."""
        pg = self.paligemma_with_expert
        for p in pg.parameters():
            p.requires_grad_(False)
        if self.cfg.lora.rank > 0:
            peft = require("peft")
            lc = self.cfg.lora
            conf = peft.LoraConfig(
                r=lc.rank,
                lora_alpha=lc.alpha,
                lora_dropout=lc.dropout,
                target_modules=r".*(language_model|gemma_expert\.model)\.layers\.\d+\..*("
                + "|".join(lc.targets)
                + ")",
            )
            peft.inject_adapter_in_model(conf, pg)

    # ---- inputs -------------------------------------------------------------------------------
    def _pad(self, x: np.ndarray) -> torch.Tensor:
        out = torch.zeros(
            x.shape[:-1] + (self.cfg.model_action_dim,), dtype=self.dtype, device=self.device
        )
        out[..., : x.shape[-1]] = torch.as_tensor(
            np.asarray(x), dtype=self.dtype, device=self.device
        )
        return out

    def _prompt(self, instruction: str, state: np.ndarray) -> list[int]:
        text = (instruction or "").strip().replace("_", " ").replace("\n", " ")
        if not self.cfg.pi05:
            return self.tokenizer(text + "\n")
        bins = np.digitize(np.clip(state, -1, 1), np.linspace(-1, 1, 257)[:-1]) - 1
        return self.tokenizer(
            f"Task: {text}, State: {' '.join(str(int(b)) for b in bins)};\nAction: "
        )

    def encode_prefix(
        self, obs: dict[str, Any]
    ) -> tuple[list, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Images + prompt through PaliGemma once: (per-layer K/V, validity [B, Lp], positions,
        state)."""
        cfg, pg = self.cfg, self.paligemma_with_expert.paligemma
        state = normalize(
            cfg.scheme, np.asarray(obs["state"], dtype=np.float64), cfg.norm_stats["state"]
        )
        imgs = images_tensor(
            obs, cfg.cameras, cfg.image_size, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)
        )  # SigLIP: [-1, 1]
        imgs = imgs.to(self.device, self.dtype)
        b = imgs.shape[0]
        vis = [
            pg.model.multi_modal_projector(pg.model.vision_tower(imgs[:, i]).last_hidden_state)
            for i in range(imgs.shape[1])
        ]
        instr = list(obs.get("instruction") or [""] * b)
        ids = [self._prompt(instr[i], state[i]) for i in range(b)]
        n = max(len(s) for s in ids)
        tok = torch.zeros(b, n, dtype=torch.long, device=self.device)
        valid_t = torch.zeros(b, n, dtype=torch.bool, device=self.device)
        for i, s in enumerate(ids):  # right-padded prompt after the images, as openpi does
            tok[i, : len(s)] = torch.tensor(s, device=self.device)
            valid_t[i, : len(s)] = True
        lm = pg.model.language_model
        text = lm.embed_tokens(tok) * math.sqrt(cfg.vlm.width)
        x = torch.cat(vis + [text], 1)
        valid = torch.cat(
            [torch.ones(b, x.shape[1] - n, dtype=torch.bool, device=self.device), valid_t], 1
        )
        pos = valid.long().cumsum(-1) - 1
        mask = block_mask(valid, torch.zeros(x.shape[1], dtype=torch.long))
        return prefix_pass(lm, x, mask, pos), valid, pos, state

    def velocity(self, prefix: tuple, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """u(x_t, t) [B, H, model_action_dim] given an encoded prefix."""
        kv, valid, pos, state = prefix
        cfg, w = self.cfg, self.cfg.expert.width
        temb = posemb_sincos(t, w).to(x_t.dtype)
        act = self.action_in_proj(x_t)
        if cfg.pi05:
            cond = nn.functional.silu(self.time_mlp_out(nn.functional.silu(self.time_mlp_in(temb))))
            suffix, ar = act, [1] + [0] * (cfg.chunk - 1)
        else:
            cond = None
            mix = torch.cat([act, temb[:, None].expand(-1, cfg.chunk, -1)], -1)
            act = self.action_time_mlp_out(nn.functional.silu(self.action_time_mlp_in(mix)))
            suffix = torch.cat([self.state_proj(self._pad(state))[:, None], act], 1)
            ar = [1, 1] + [0] * (cfg.chunk - 1)
        b, ls, lp = suffix.shape[0], suffix.shape[1], valid.shape[1]
        full_valid = torch.cat([valid, torch.ones(b, ls, dtype=torch.bool, device=valid.device)], 1)
        mask = block_mask(full_valid, torch.tensor([0] * lp + ar))[:, lp:]
        spos = (
            valid.long().sum(-1, keepdim=True)
            - 1
            + torch.arange(1, ls + 1, device=valid.device)[None]
        )
        out = suffix_pass(
            self.paligemma_with_expert.gemma_expert.model, suffix, kv, mask, spos, cond
        )
        return self.action_out_proj(out[:, -cfg.chunk :])

    # ---- adapter interface -----------------------------------------------------------------
    def act(
        self,
        obs: dict[str, Any],
        deterministic: bool = True,
        rtc_prefix: Any = None,
        rtc_inference_delay: int = 0,
        rtc_execute_horizon: int = 1,
        generator: torch.Generator | None = None,
        **kw: Any,
    ) -> ActOutput:
        cfg = self.cfg
        prefix = self.encode_prefix(obs)
        b = prefix[1].shape[0]
        noise = torch.randn(b, cfg.chunk, cfg.model_action_dim, generator=generator).to(
            self.device, self.dtype
        )
        guide = None
        if rtc_prefix is not None and len(np.asarray(rtc_prefix)):
            p = np.asarray(rtc_prefix, dtype=np.float64)
            p = np.broadcast_to(p, (b,) + p.shape) if p.ndim == 2 else p
            guide = self._pad(normalize(cfg.scheme, p, cfg.norm_stats["actions"]))
        sigma = 0.0 if deterministic else cfg.sigma
        with torch.no_grad() if guide is None else torch.enable_grad():
            out = flow.sample(
                lambda x, t: self.velocity(prefix, x, t),
                noise,
                cfg.num_steps,
                sigma,
                guide,
                int(rtc_inference_delay),
                int(rtc_execute_horizon),
                cfg.max_guidance,
                generator,
            )
        model = out.actions[..., : cfg.action_dim].detach().float().cpu().numpy()
        robot = unnormalize(cfg.scheme, model, cfg.norm_stats["actions"])
        logp = out.log_prob if sigma > 0 else torch.zeros(b)
        return ActOutput(
            robot.astype(np.float32),
            logp.detach().cpu().numpy(),
            {"chain": out.chain.detach().cpu()},
            model.astype(np.float32),
        )

    def log_prob(self, obs: dict[str, Any], extras: dict[str, torch.Tensor]) -> torch.Tensor:
        """Log-density [B] of a stored denoising chain under the current weights (noise-injected
        SDE)."""
        prefix = self.encode_prefix(obs)
        chain = torch.as_tensor(extras["chain"]).to(self.device, self.dtype)
        return flow.chain_log_prob(lambda x, t: self.velocity(prefix, x, t), chain, self.cfg.sigma)

    def flow_loss(
        self, obs: dict[str, Any], actions: np.ndarray, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Flow-matching loss against robot-unit chunks [B, chunk, action_dim] (SFT)."""
        cfg = self.cfg
        target = self._pad(normalize(cfg.scheme, actions, cfg.norm_stats["actions"]))
        b = target.shape[0]
        noise = torch.randn(target.shape, generator=generator).to(target)
        t = flow.sample_time(b, generator).to(target)
        x_t, u_t = flow.flow_targets(target, noise, t)
        u = self.velocity(self.encode_prefix(obs), x_t, t)
        return (u - u_t)[..., : cfg.action_dim].float().pow(2).mean()


@ADAPTERS.register("pi0")
def _pi0(cfg: Pi0Config | None = None) -> Pi0Adapter:
    return Pi0Adapter(cfg or Pi0Config())


@ADAPTERS.register("pi05")
def _pi05(cfg: Pi0Config | None = None) -> Pi0Adapter:
    return Pi0Adapter(cfg or Pi0Config(pi05=True))
