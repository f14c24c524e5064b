"""Learner policies, built by name: ``build_policy("mlp", spec, hidden=[64, 64])``.

Every model records the name and kwargs it was built with (``policy.model_name``,
``policy.model_kwargs``) so a checkpoint can rebuild it without the training config;
``learner.checkpoint.load_policy`` does exactly that for the policy server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from learner.models.actor_critic import ActorCriticPolicy
from learner.models.heads import HEADS
from learner.models.offpolicy import SquashedGaussianPolicy
from learner.models.policy import Policy, PolicyOutput, PolicySpec, obs_to_tensors
from rlinf_contracts.registry import Registry

MODELS: Registry[Callable[..., Policy]] = Registry("model")


@MODELS.register("mlp")
def _mlp(spec: PolicySpec, **kwargs: Any) -> Policy:
    """State-only actor-critic (images in the observation are ignored)."""
    return ActorCriticPolicy(spec, use_images=False, **kwargs)


@MODELS.register("cnn")
def _cnn(spec: PolicySpec, **kwargs: Any) -> Policy:
    """Image (+ state) actor-critic with a small CNN per camera."""
    return ActorCriticPolicy(spec, use_images=True, **kwargs)


@MODELS.register("sac")
def _sac(spec: PolicySpec, **kwargs: Any) -> Policy:
    """Off-policy (SAC / RLPD / CrossQ) tanh-Gaussian actor; with ``use_images`` a pixel encoder."""
    return SquashedGaussianPolicy(spec, **kwargs)


@MODELS.register("success_classifier")
def _success_classifier(spec: PolicySpec, **kwargs: Any) -> Policy:
    """Binary success classifier on a camera (reward source); its one "action" is p_success."""
    from learner.models.success_classifier import SuccessClassifier

    return SuccessClassifier(spec, **kwargs)


@MODELS.register("vla_tokens")
def _vla_tokens(spec: PolicySpec, **kwargs: Any) -> Policy:
    """Small VLA (CNN + frozen MiniLM instruction + fusion) with 256-bin action tokens."""
    from learner.models.vla import VLAPolicy

    return VLAPolicy(spec, **{**kwargs, "head": "tokens"})


@MODELS.register("vla_flow")
def _vla_flow(spec: PolicySpec, **kwargs: Any) -> Policy:
    """Small VLA with a flow-matching action expert (noise-injected sampling for RL log-probs)."""
    from learner.models.vla import VLAPolicy

    return VLAPolicy(spec, **{**kwargs, "head": "flow"})


@MODELS.register("vla_adapter")
def _vla_adapter(spec: PolicySpec, **kwargs: Any) -> Policy:
    """A full-size VLA adapter (OpenVLA / OpenVLA-OFT / π0 / π0.5; ``adapter: {tiny: true}`` on a
    CPU)."""
    from learner.models.vla_adapter_policy import VlaAdapterPolicy

    return VlaAdapterPolicy(spec, **kwargs)


# models that read the env's cameras / the instruction (the trainer builds their PolicySpec so)
IMAGE_MODELS = frozenset({"cnn", "vla_tokens", "vla_flow", "vla_adapter"})
INSTRUCTION_MODELS = frozenset({"vla_tokens", "vla_flow", "vla_adapter"})


def build_policy(name: str, spec: PolicySpec, **kwargs: Any) -> Policy:
    """Build the model registered as ``name`` for ``spec``; remembers name and kwargs."""
    policy = MODELS.get(name)(spec, **kwargs)
    policy.model_name = name
    policy.model_kwargs = dict(kwargs)
    return policy


__all__ = [
    "MODELS",
    "HEADS",
    "IMAGE_MODELS",
    "INSTRUCTION_MODELS",
    "ActorCriticPolicy",
    "SquashedGaussianPolicy",
    "Policy",
    "PolicyOutput",
    "PolicySpec",
    "build_policy",
    "obs_to_tensors",
]
