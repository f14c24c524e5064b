"""What the policy server serves: anything with a robot spec and ``infer(obs) -> {"actions": ...}``.

Why a protocol and not a torch module: the server's job is the wire, batching and hot-swap; it
must not care whether actions come from a learner checkpoint, a scripted controller, a JAX
model or a remote call. A learner model is served through one adapter
(``learner.serving.TorchPolicy``); tests serve numpy policies; nothing here imports torch.

- :class:`ServedPolicy`: ``robot_spec`` (what the policy was trained for: state layout, action
  space, cameras — announced to clients and checked on connect) and ``infer(batch)`` over a
  *batched* canonical observation (``state [B, D]``, ``images {cam: [B, H, W, 3]}``,
  ``instruction [B]``) returning ``{"actions": float [B, chunk, A]}``.
- :class:`SwappablePolicy`: adds ``clone()`` and ``load_weights(data) -> tensors loaded``, which
  the server's double buffer needs for weight pushes. A policy without them refuses pushes.
- An optional ``thread_init()`` attribute runs once in the server's forward thread (torch uses
  it to size its OpenMP team per thread).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from rlinf_contracts.spec import RobotSpec


@runtime_checkable
class ServedPolicy(Protocol):
    robot_spec: RobotSpec

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        """Batched canonical observation -> ``{"actions": [B, chunk, A]}`` (+ optional extras)."""
        ...


@runtime_checkable
class SwappablePolicy(ServedPolicy, Protocol):
    def clone(self) -> SwappablePolicy:
        """An independent copy that can receive weights while the original keeps serving."""
        ...

    def load_weights(self, data: bytes) -> int:
        """Load a safetensors blob; returns the number of tensors. Raises ``ValueError`` naming
        the tensor when the weights do not fit."""
        ...


def check_policy(policy: Any) -> ServedPolicy:
    """``policy`` if it satisfies :class:`ServedPolicy`, else a ``TypeError`` saying what is
    missing."""
    missing = [n for n in ("robot_spec", "infer") if not hasattr(policy, n)]
    if missing:
        raise TypeError(
            f"{type(policy).__name__} cannot be served: it lacks {missing}. Serve an object with "
            "'robot_spec' and 'infer(obs) -> {\"actions\": ...}' (a learner model: wrap it in "
            "learner.serving.TorchPolicy)"
        )
    if not isinstance(policy.robot_spec, RobotSpec):
        raise TypeError(
            f"{type(policy).__name__}.robot_spec must be a rlinf_contracts.spec.RobotSpec, "
            f"got {type(policy.robot_spec).__name__}"
        )
    return policy
