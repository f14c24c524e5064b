"""A learner model as something the policy server can serve (``policy_server.policy`` protocol).

Why an adapter and not a server that knows torch: the server serves any object with a robot
spec and ``infer``; this is the one place where a learner :class:`~learner.models.Policy`
(torch) meets it, including weight loading for hot-swap and the per-thread torch setup.

>>> from learner.models import PolicySpec, build_policy
>>> spec = PolicySpec(state_dim=3, action_dim=2, chunk=4)
>>> served = TorchPolicy(build_policy("mlp", spec, hidden=[8]))
>>> served.infer({"state": np.zeros((5, 3), np.float32)})["actions"].shape
(5, 4, 2)
>>> served.robot_spec.describe()
'state[3] = state(3); action[2] raw x4 @10Hz; cameras: none'
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learner.models import Policy
from rlinf_contracts.spec import RobotSpec
from rlinf_contracts.weight_blob import weights_from_bytes


class TorchPolicy:
    """Serve a learner policy: batched numpy in, ``{"actions": [B, chunk, A]}`` out."""

    def __init__(self, policy: Policy, deterministic: bool = True, threads: int = 0) -> None:
        policy.eval()
        self.policy = policy
        self.deterministic = deterministic
        self.threads = threads
        self.robot_spec: RobotSpec = policy.spec.robot_spec()
        self.name = str(getattr(policy, "model_name", type(policy).__name__))

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        actions, _, _ = self.policy.act(obs, deterministic=self.deterministic)
        # a sampled flow action carries its denoising chain as latent columns: serve the action
        return {
            "actions": np.asarray(actions[..., : self.policy.spec.action_dim], dtype=np.float32)
        }

    def thread_init(self) -> None:
        """OpenMP teams are per thread: size torch's in the server's forward thread."""
        torch.set_num_threads(self.threads or torch.get_num_threads())

    def clone(self) -> TorchPolicy:
        return TorchPolicy(copy.deepcopy(self.policy), self.deterministic, self.threads)

    def load_weights(self, data: bytes) -> int:
        """Pushed safetensors bytes (:func:`rlinf_contracts.weight_blob.weights_to_bytes`) into
        this copy; ValueError naming the problem when they are no blob or do not fit."""
        state = {k: torch.from_numpy(v) for k, v in weights_from_bytes(data).items()}
        try:
            with torch.no_grad():
                self.policy.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise ValueError(
                f"weights do not fit policy {type(self.policy).__name__}: {e}"
            ) from None
        self.policy.eval()
        return len(state)


def load_served_checkpoint(
    path: str | Path, device: str = "cpu", deterministic: bool = True, threads: int = 0
) -> tuple[TorchPolicy, int]:
    """(served policy, weight version) for a checkpoint directory or run directory."""
    from learner.checkpoint import load_policy

    policy, meta = load_policy(path, device=device)
    return TorchPolicy(policy, deterministic, threads), int(meta.get("weight_version", 0))
