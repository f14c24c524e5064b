"""Full-size VLA adapters (OpenVLA, OpenVLA-OFT, π0 / π0.5) behind import guards.

Why a separate package: these models need ``transformers`` and ``peft`` (the ``llm`` extra)
and, at full size, a GPU; nothing else in the learner may depend on them. Each adapter is one
module, registered by name in :data:`ADAPTERS`, and builds its model from a small typed config
with *random weights* and the *real checkpoints' parameter names*, so the same code loads a
tiny model on a CPU in tests and the released checkpoint on a GPU (``configs/vla_*_gpu.yaml``).

What every adapter provides (:class:`learner.models.adapters.common.VlaAdapter`): ``act`` (numpy
observation batch in, robot-unit action chunks out, plus what RL needs to score them again),
``log_prob`` (differentiable), ``trainable_parameters`` (LoRA and new heads only) and
``load_state_dict_file`` (safetensors with the real key names). ``serve(adapter)`` wraps one for
the policy server (``robot_spec`` + ``infer``).

The runners (``vla_sft``, embodied PPO / GRPO) train them as the learner model ``vla_adapter``
(:mod:`learner.models.vla_adapter_policy`); checkpoints, ``rlinf eval`` and ``rlinf serve`` follow.

Pure parts (no torch): :mod:`.action_tokens` (OpenVLA's 256-bin action tokens) and
:mod:`.normalization` (bounds_q99 / mean_std / quantile statistics).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from rlinf_contracts.registry import Registry

ADAPTERS: Registry[Callable[..., Any]] = Registry("vla adapter")


def require(module: str, extra: str = "llm") -> Any:
    """Import ``module`` or raise an ImportError that says which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"the full-size VLA adapters need '{module}' ({e}); install it with "
            f"pip install 'rlinf-ros[{extra}]'"
        ) from None


def build_adapter(name: str, **kwargs: Any) -> Any:
    """Build the adapter registered as ``name`` (its module is imported on first use)."""
    _load_builtin()
    return ADAPTERS.get(name)(**kwargs)


def _load_builtin() -> None:
    for mod in ("openvla", "openvla_oft", "pi0"):
        importlib.import_module(f"{__name__}.{mod}")


__all__ = ["ADAPTERS", "build_adapter", "require"]
