"""Configs that put a released VLA checkpoint behind its adapter (``configs/vla_*_gpu.yaml``).

Why a plan before a load: the real checkpoints are 3-15 GB and need a GPU; what can be checked
without them -- the YAML's keys and types, which adapter it selects, which files it will read
and the full-size model config it builds -- is checked by :func:`load_plan` in tests on any
machine; :func:`load_adapter` then does the same and reads the weights.

Section ``adapter``: ``name`` (registered adapter), ``checkpoint`` (directory of
``*.safetensors`` shards with the real key names), ``norm_stats`` (statistics file inside it:
OpenVLA's ``dataset_statistics.json`` with ``unnorm_key``, openpi's ``norm_stats.json``),
``tokenizer`` (read the checkpoint's own tokenizer), ``device`` / ``dtype`` and ``model``
(overrides of the adapter's config dataclass; sizes default to the released model); ``tiny``
builds the adapter's random-weight ``tiny()`` config instead (no checkpoint; CPU runs of the same
training path). A training config carries this section at top level (``rlinf train`` folds it into
``model.kwargs.adapter`` of model ``vla_adapter``, :func:`check_checkpoint` first).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlinf_contracts.config import ConfigError, from_dict, load_config, to_dict
from rlinf_contracts.registry import Registry


@dataclass
class AdapterSection:
    name: str = field(default="openvla", metadata={"help": "openvla | openvla_oft | pi0 | pi05"})
    checkpoint: str = field(
        default="", metadata={"help": "checkpoint directory (safetensors shards, real key names)"}
    )
    norm_stats: str = field(
        default="dataset_statistics.json", metadata={"help": "statistics file in the checkpoint"}
    )
    unnorm_key: str = field(
        default="", metadata={"help": "OpenVLA: dataset whose statistics un-normalise actions"}
    )
    tokenizer: bool = field(
        default=True, metadata={"help": "load the checkpoint's own tokenizer (else bytes)"}
    )
    device: str = "cuda"
    dtype: str = field(default="bfloat16", metadata={"help": "float32 | bfloat16 | float16"})
    model: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "overrides of the adapter's config"}
    )
    tiny: bool = field(
        default=False,
        metadata={"help": "random-weight tiny model of the real key layout (CPU; no checkpoint)"},
    )

    def validate(self) -> None:
        if self.name not in CONFIGS:
            raise ConfigError(
                f"key 'adapter.name' must be one of {CONFIGS.names()}, got {self.name!r}"
            )
        if self.tiny and self.checkpoint:
            raise ConfigError(
                "keys 'adapter.tiny' and 'adapter.checkpoint' exclude each other: a tiny model has "
                "random weights"
            )
        if not self.checkpoint and not self.tiny:
            raise ConfigError(
                "key 'adapter.checkpoint' must name the checkpoint directory (or adapter.tiny=true)"
            )
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(
                f"key 'adapter.dtype' must be float32 | bfloat16 | float16, got {self.dtype!r}"
            )


@dataclass
class ServeSection:
    host: str = "0.0.0.0"
    port: int = 8000


@dataclass
class VlaGpuConfig:
    adapter: AdapterSection = field(default_factory=AdapterSection)
    serve: ServeSection = field(default_factory=ServeSection)


# name -> (config class, how the checkpoint's files fill it in)
CONFIGS: Registry[tuple[Callable[[], Any], Callable[[Any, AdapterSection, Path], None]]] = Registry(
    "vla config"
)


def _openvla_fill(cfg: Any, sec: AdapterSection, ckpt: Path) -> None:
    cfg.checkpoint, cfg.norm_stats_path, cfg.unnorm_key = (
        str(ckpt),
        str(ckpt / sec.norm_stats),
        sec.unnorm_key,
    )
    cfg.tokenizer = str(ckpt) if sec.tokenizer else ""


def _pi0_fill(cfg: Any, sec: AdapterSection, ckpt: Path) -> None:
    cfg.checkpoint, cfg.tokenizer = str(ckpt), str(ckpt) if sec.tokenizer else ""


def _register() -> None:
    from learner.models.adapters.openvla import OpenVlaConfig
    from learner.models.adapters.openvla_oft import OftConfig
    from learner.models.adapters.pi0 import Pi0Config

    CONFIGS.add("openvla", (OpenVlaConfig, _openvla_fill))
    CONFIGS.add("openvla_oft", (OftConfig, lambda c, s, p: _openvla_fill(c.vla, s, p)))
    CONFIGS.add("pi0", (Pi0Config, _pi0_fill))
    CONFIGS.add("pi05", (lambda: Pi0Config(pi05=True), _pi0_fill))


_register()


def load_gpu_config(path: str | Path, overrides: list[str] | None = None) -> VlaGpuConfig:
    """The ``adapter`` / ``serve`` sections of a GPU config (a training config's other sections are
    the runner's: ``rlinf train`` reads those)."""
    raw = load_config(path, overrides)
    return from_dict(VlaGpuConfig, {k: v for k, v in raw.items() if k in ("adapter", "serve")})


def check_checkpoint(sec: AdapterSection) -> None:
    """The files a real load reads exist (ConfigError naming ``adapter.checkpoint`` otherwise)."""
    if sec.tiny:
        return
    ckpt = Path(sec.checkpoint)
    if not ckpt.is_dir():
        raise ConfigError(
            f"key 'adapter.checkpoint': no checkpoint directory at {ckpt} (download the released "
            f"{sec.name} weights there, or set adapter.checkpoint=DIR; for a CPU run of the same "
            "path use adapter.tiny=true, see configs/sim_franka_language_*_tiny_*.yaml)"
        )
    if not list(ckpt.glob("*.safetensors")):
        raise ConfigError(f"key 'adapter.checkpoint': {ckpt} holds no *.safetensors shards")
    if not (ckpt / sec.norm_stats).is_file():
        raise ConfigError(f"key 'adapter.norm_stats': no {sec.norm_stats} in {ckpt}")


def tiny_plan(sec: AdapterSection) -> Any:
    """The adapter's ``tiny()`` config with ``adapter.model`` overrides (errors name the key)."""
    make, _ = CONFIGS.get(sec.name)
    tiny = type(make()).tiny()
    if sec.name == "pi05":
        tiny.pi05 = True
    return from_dict(type(tiny), _merge(to_dict(tiny), sec.model), path="adapter.model")


def load_plan(cfg: VlaGpuConfig) -> dict[str, Any]:
    """What :func:`load_adapter` would do, without touching the checkpoint: the adapter, its
    full-size config (overrides applied, errors naming ``adapter.model.<key>``) and the files."""
    sec = cfg.adapter
    make, fill = CONFIGS.get(sec.name)
    model_cfg = make()
    base = from_dict(type(model_cfg), _merge(to_dict(model_cfg), sec.model), path="adapter.model")
    if sec.name == "pi05":
        base.pi05 = True
    ckpt = Path(sec.checkpoint)
    fill(base, sec, ckpt)
    files = [str(ckpt / "*.safetensors"), str(ckpt / sec.norm_stats)]
    if sec.tokenizer:
        files.append(str(ckpt / "tokenizer.model"))
    return {
        "adapter": sec.name,
        "config": base,
        "files": files,
        "device": sec.device,
        "dtype": sec.dtype,
    }


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` onto ``base``, recursing into nested maps (``model: {vla: {chunk: 8}}``)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_adapter(cfg: VlaGpuConfig) -> Any:
    """Build the adapter, load the released weights and statistics, move it to the device (GPU)."""
    import torch

    from learner.models.adapters import build_adapter

    adapter = build_adapter(cfg.adapter.name, cfg=real_model_config(cfg.adapter))
    return adapter.to(device=cfg.adapter.device, dtype=getattr(torch, cfg.adapter.dtype))


def real_model_config(sec: AdapterSection) -> Any:
    """The full-size config of a load plan with the checkpoint's statistics read (π0 / π0.5)."""
    check_checkpoint(sec)
    model_cfg = load_plan(VlaGpuConfig(adapter=sec))["config"]
    if sec.name in ("pi0", "pi05") and not model_cfg.norm_stats:
        data = json.loads((Path(sec.checkpoint) / sec.norm_stats).read_text())
        model_cfg.norm_stats = data.get("norm_stats", data)
    return model_cfg
