"""Policy weights as safetensors bytes and back: the one encoding of weights on the wire.

Why here, in the bottom room: the learner encodes (``policy_server.push`` sends what a runner
offers) and the policy server's hot-swap decodes (``learner.serving.TorchPolicy.load_weights``),
and ``learner`` and ``policy_server`` share only ``rlinf_contracts``. Why numpy: this room and
the policy server never import torch; a torch tensor is converted through its own methods.
bfloat16 (which numpy lacks) travels as float32, which holds every bfloat16 value exactly; the
receiving ``load_state_dict`` casts it back. A checkpoint's ``model.safetensors`` is the same
format, so its bytes decode here too. ``safetensors`` is imported when used (learner extra).

>>> import numpy as np
>>> blob = weights_to_bytes({"w": np.arange(3, dtype=np.float32)})
>>> weights_from_bytes(blob)["w"].tolist()
[0.0, 1.0, 2.0]
>>> weights_from_bytes(b"not safetensors")
Traceback (most recent call last):
...
ValueError: weight data is not a valid safetensors blob: ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["weights_to_bytes", "weights_from_bytes"]


def _as_numpy(value: Any) -> np.ndarray:
    """A contiguous CPU numpy copy of a numpy array or a torch tensor (duck-typed)."""
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return np.ascontiguousarray(value.numpy()).copy()
    return np.ascontiguousarray(value)


def weights_to_bytes(weights: Mapping[str, Any]) -> bytes:
    """Safetensors bytes of a state dict (torch tensors or numpy arrays, by name)."""
    from safetensors.numpy import save

    return save({k: _as_numpy(v) for k, v in weights.items()}, metadata={"format": "pt"})


def weights_from_bytes(data: bytes | bytearray | memoryview) -> dict[str, np.ndarray]:
    """The named arrays of a safetensors blob (writable copies); ValueError when it is not one."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    try:
        return load(bytes(data))
    except (SafetensorError, ValueError, RuntimeError, OverflowError) as e:
        raise ValueError(f"weight data is not a valid safetensors blob: {e}") from None
