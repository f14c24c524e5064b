"""Double-buffered policy weights: load a new version beside the serving model, swap between batches.

Why two model instances: a push must never mutate the model a batch is using, and allocating a
fresh model per push would double peak memory churn on every swap. The *spare* receives the new
state dict (``load_state_dict(strict=True)``, so a push with a missing, extra or mis-shaped
tensor is refused naming it); the batcher then calls :meth:`ModelSlot.activate` between two
batches, which is a pointer swap. The old active becomes the next spare only after the swap,
when no batch can be using it any more. Pushes are serialised by the caller (one at a time).
"""

from __future__ import annotations

import copy
import logging
import threading

import torch

from learner.models.policy import Policy

log = logging.getLogger(__name__)


class WeightLoadError(ValueError):
    """A pushed state dict that cannot be loaded into the served policy; says why."""


def state_dict_to_bytes(state_dict: dict[str, torch.Tensor]) -> bytes:
    """Serialise a state dict as safetensors (contiguous CPU copies; shared storage is split)."""
    from safetensors.torch import save

    flat = {k: v.detach().to("cpu").contiguous().clone() for k, v in state_dict.items()}
    return save(flat)


class ModelSlot:
    """The serving policy (``active``) plus a spare instance that receives pushed weights."""

    def __init__(self, policy: Policy, version: int = 0) -> None:
        policy.eval()
        self.active: Policy = policy
        self.version = version
        self._spare: Policy = copy.deepcopy(policy)
        self._staged: int | None = None  # version loaded into the spare, awaiting activation
        self._lock = threading.Lock()  # guards spare/active pointers across threads

    def load_spare(self, data: bytes, version: int) -> int:
        """Load safetensors ``data`` into the spare (runs in a worker thread); returns #tensors."""
        from safetensors import SafetensorError
        from safetensors.torch import load

        try:
            state = load(bytes(data))
        except (SafetensorError, ValueError, RuntimeError) as e:
            raise WeightLoadError(f"weight data is not a valid safetensors blob: {e}") from None
        with self._lock:
            spare = self._spare
        try:
            with torch.no_grad():
                spare.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise WeightLoadError(f"weights do not fit policy {type(spare).__name__}: {e}") from None
        spare.eval()
        with self._lock:
            self._staged = version
        return len(state)

    def activate(self, version: int) -> None:
        """Make the spare (loaded with ``version``) the serving model. Call only between batches."""
        with self._lock:
            if self._staged != version:
                raise RuntimeError(f"cannot activate weight version {version}: staged is {self._staged}")
            self.active, self._spare = self._spare, self.active
            self.version = version
            self._staged = None
