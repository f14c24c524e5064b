"""What the VLA adapters share: adapter base, prompt tokens, image input, LoRA, loading, serving.

Why a byte tokenizer: the real checkpoints ship their SentencePiece tokenizers, which cannot be
downloaded here; tests and tiny models use UTF-8 bytes mapped to ids ``3..258`` (0 pad, 1 BOS,
2 EOS), and a GPU config names the checkpoint directory whose tokenizer ``transformers``
loads instead (``tokenizer: path``). Everything downstream only sees id tensors.
"""

from __future__ import annotations

import abc
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from learner.models.adapters import require
from rlinf_contracts.spec import RobotSpec


class ByteTokenizer:
    """UTF-8 bytes -> ids 3..258; ``bos`` = 1. Deterministic, offline, any vocabulary >= 259."""

    pad_id, bos_id, eos_id = 0, 1, 2

    def __call__(self, text: str) -> list[int]:
        return [self.bos_id] + [b + 3 for b in text.encode("utf-8")]


def hf_tokenizer(path: str) -> Any:
    """A checkpoint's own tokenizer (files on disk only; nothing is downloaded)."""
    transformers = require("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    return lambda text: list(tok(text)["input_ids"])


def images_tensor(
    obs: dict[str, Any],
    cameras: tuple[str, ...],
    size: int,
    mean: tuple[float, ...],
    std: tuple[float, ...],
) -> torch.Tensor:
    """uint8 ``images/<cam>`` [B, H, W, 3] -> float [B, n_cams, 3, size, size], resized and
    normalised."""
    imgs = obs.get("images") or {}
    missing = [c for c in cameras if c not in imgs]
    if missing:
        raise KeyError(
            f"observation lacks image(s) {missing}; this VLA reads cameras {list(cameras)}"
        )
    out = []
    for cam in cameras:
        x = torch.as_tensor(np.ascontiguousarray(imgs[cam])).float().div(255.0).permute(0, 3, 1, 2)
        if x.shape[-1] != size or x.shape[-2] != size:
            x = nn.functional.interpolate(
                x, size=(size, size), mode="bilinear", align_corners=False
            )
        m = torch.tensor(mean).view(1, 3, 1, 1)
        s = torch.tensor(std).view(1, 3, 1, 1)
        out.append((x - m) / s)
    return torch.stack(out, 1)


@dataclass
class LoraSpec:
    """LoRA on the language model's linear layers (peft); ``rank: 0`` trains nothing there."""

    rank: int = field(default=8, metadata={"help": "LoRA rank (OpenVLA fine-tuning: 32)"})
    alpha: int = field(default=16, metadata={"help": "LoRA alpha"})
    dropout: float = 0.0
    targets: list[str] = field(
        default_factory=lambda: [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ]
    )


def add_lora(module: nn.Module, lora: LoraSpec) -> nn.Module:
    """Freeze ``module`` and wrap it with LoRA adapters (peft); returns the wrapped module."""
    for p in module.parameters():
        p.requires_grad_(False)
    if lora.rank <= 0:
        return module
    peft = require("peft")
    cfg = peft.LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.targets),
    )
    return peft.get_peft_model(module, cfg)


@dataclass
class ActOutput:
    actions: np.ndarray  # [B, chunk, A] in robot units
    log_prob: np.ndarray  # [B]
    extras: dict[
        str, torch.Tensor
    ]  # what log_prob needs to score this sample again (tokens, chain)
    model_actions: np.ndarray  # [B, chunk, A] in model (normalised) units


class VlaAdapter(nn.Module, abc.ABC):
    """One full-size VLA behind the adapter interface (see the package docstring)."""

    chunk: int
    action_dim: int
    state_dim: int
    cameras: tuple[str, ...]
    image_size: int
    # the entry points that run the weights: a sharded (fsdp) actor gathers them around these
    # calls, which the policy's lazy distribution makes outside the policy's forward
    fsdp_forward_methods: tuple[str, ...] = ("act", "log_prob")

    @abc.abstractmethod
    def act(self, obs: dict[str, Any], deterministic: bool = True, **kw: Any) -> ActOutput: ...

    @abc.abstractmethod
    def log_prob(self, obs: dict[str, Any], extras: dict[str, torch.Tensor]) -> torch.Tensor: ...

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def base_state_dict(self) -> dict[str, torch.Tensor]:
        """The weights under the real checkpoint's key names (LoRA wrappers stripped)."""
        return {k: v for k, v in self.state_dict().items()}

    key_renames: tuple[tuple[str, str], ...] = ()  # older exports' prefixes -> ours

    def load_state_dict_file(self, path: str | Path, strict: bool = True) -> int:
        """Load safetensors whose keys are the real checkpoint's (a file, or a directory of
        shards)."""
        state = read_safetensors(path)
        for old, new in self.key_renames:
            state = {k.replace(old, new): v for k, v in state.items()}
        try:
            missing, unexpected = self.load_state_dict(state, strict=False)
        except RuntimeError as e:  # shapes differ: another model size
            raise ValueError(f"{path}: weights do not fit {type(self).__name__}: {e}") from None
        if strict and (missing or unexpected):
            raise ValueError(
                f"{path}: weights do not fit {type(self).__name__}: missing {sorted(missing)[:5]}"
                f"{'...' if len(missing) > 5 else ''}, unexpected {sorted(unexpected)[:5]}"
            )
        return len(state)

    def robot_spec(self) -> RobotSpec:
        sizes = {c: (self.image_size, self.image_size) for c in self.cameras}
        return RobotSpec.raw(self.state_dim, self.action_dim, self.chunk, sizes, True)


def read_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """One safetensors file, or every ``*.safetensors`` shard of a checkpoint directory merged."""
    from safetensors.torch import load_file

    p = Path(path)
    files = sorted(p.glob("*.safetensors")) if p.is_dir() else [p]
    if not files or not files[0].exists():
        raise FileNotFoundError(f"no safetensors weights at {p}")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    return state


RTC_EXTRAS = ("rtc_prefix", "rtc_inference_delay")


class ServedVla:
    """A VLA adapter as a served policy: ``robot_spec`` + batched ``infer``.

    Extra request keys ``rtc_prefix`` [B, P, A] / ``rtc_inference_delay`` (sent by the policy
    client's real-time chunking) are passed to adapters that can inpaint (flow policies).
    """

    def __init__(
        self, adapter: VlaAdapter, robot_spec: RobotSpec | None = None, deterministic: bool = True
    ) -> None:
        adapter.eval()
        self.adapter = adapter
        self.deterministic = deterministic
        self.robot_spec = robot_spec or adapter.robot_spec()
        self.name = type(adapter).__name__
        # the policy server passes these request extras to infer only when listed here
        self.infer_extras = (
            RTC_EXTRAS if "rtc_prefix" in inspect.signature(adapter.act).parameters else ()
        )

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        kw = {k: obs[k] for k in self.infer_extras if k in obs}
        with torch.no_grad():
            out = self.adapter.act(obs, deterministic=self.deterministic, **kw)
        return {"actions": np.asarray(out.actions, dtype=np.float32)}


def serve(adapter: VlaAdapter, robot_spec: RobotSpec | None = None) -> ServedVla:
    """Wrap ``adapter`` for the policy server (checked by ``policy_server.policy.check_policy``)."""
    return ServedVla(adapter, robot_spec)
