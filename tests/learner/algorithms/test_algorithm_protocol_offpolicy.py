"""Every off-policy / offline / supervised learner is an ``Algorithm``: one-argument ``update``,
``policy()``, and a ``state_dict`` that resumes exactly (the next update after a round trip gives
the same metrics and the same weights as the original's)."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import algo_toys
import numpy as np
import pytest
import torch
from torch import nn

from learner.algorithms.protocol import Algorithm
from learner.algorithms.rlpd import RLPDConfig
from learner.algorithms.sac import OFF_POLICY_LEARNERS
from learner.models import PolicySpec, build_policy, obs_to_tensors
from learner.offline.config import OfflineConfig
from learner.offline.supervised import ClassifierLearner, SFTLearner
from learner.offline.trainers import OFFLINE_LEARNERS, make_policy
from rlinf_contracts.config import from_dict

OBS, ACT = 3, 2


def _transitions(seed: int, n: int = 16) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, OBS, generator=g),
        "action": torch.rand(n, ACT, generator=g) * 2 - 1,
        "reward": torch.randn(n, generator=g),
        "next_obs": torch.randn(n, OBS, generator=g),
        "done": (torch.rand(n, generator=g) < 0.2).float(),
        "weight": torch.rand(n, generator=g) + 0.5,
    }


def _off_policy(name: str) -> Callable[[], Any]:
    def make() -> Any:
        actor = algo_toys.TanhGaussianActor(OBS, ACT, hidden=8)
        if name == "rlpd":
            return OFF_POLICY_LEARNERS.get(name)(
                actor, OBS, ACT, RLPDConfig(n_critics=3, hidden=(8,))
            )
        return OFF_POLICY_LEARNERS.get(name)(actor, OBS, ACT, None, hidden=(8,))

    return make


def _offline(name: str) -> Callable[[], Any]:
    cfg = from_dict(
        OfflineConfig,
        {"algorithm": {"name": name}, "data": {"demos": "d"}, "model": {"hidden": [8]}},
    )
    spec = PolicySpec(state_dim=OBS, action_dim=ACT, chunk=1, cameras={})
    return lambda: OFFLINE_LEARNERS.get(name)(cfg, make_policy(cfg, spec))


VLA_SPEC = PolicySpec(
    state_dim=OBS, action_dim=ACT, chunk=2, cameras={"front": (16, 16)}, uses_instruction=True
)


def _vla_batch(seed: int) -> tuple[dict[str, Any], torch.Tensor]:
    rng = np.random.default_rng(seed)
    obs = {
        "state": torch.as_tensor(rng.normal(size=(4, OBS)).astype(np.float32)),
        "images": {"front": torch.as_tensor(rng.integers(0, 255, (4, 16, 16, 3), np.uint8))},
        "instruction": ["reach the red cube", "push the cube"] * 2,
    }
    return obs, torch.as_tensor(rng.uniform(-1, 1, (4, 2, ACT)).astype(np.float32))


def _sft() -> SFTLearner:
    net = build_policy(
        "vla_tokens",
        VLA_SPEC,
        hidden=[16],
        text_encoder="hash",
        image_feat_dim=8,
        cnn_channels=[4, 4, 4],
    )
    return SFTLearner(net, lr=1e-3)


CLS_SPEC = PolicySpec(state_dim=OBS, action_dim=1, chunk=1, cameras={"front": (16, 16)})


def _classifier_batch(seed: int) -> tuple[dict[str, Any], torch.Tensor]:
    rng = np.random.default_rng(seed)
    obs = obs_to_tensors(
        {
            "state": rng.normal(size=(6, OBS)).astype(np.float32),
            "images": {"front": rng.integers(0, 255, (6, 16, 16, 3), np.uint8)},
        }
    )
    return obs, torch.as_tensor((rng.random(6) < 0.3).astype(np.float32))


def _classifier() -> ClassifierLearner:
    net = build_policy(
        "success_classifier", CLS_SPEC, camera="front", channels=[4], hidden=8, use_state=True
    )
    return ClassifierLearner(net, lr=1e-3, pos_weight=2.5)


def _autoencoder() -> Any:
    from learner.algorithms.spatial_autoencoder import AutoencoderConfig, SpatialAutoencoderLearner
    from learner.models.encoder_kinds import KeypointBackbone

    backbone = KeypointBackbone((4, 4))
    cfg = AutoencoderConfig(target_hw=(4, 4), pad=2)
    return SpatialAutoencoderLearner(backbone, backbone.out_dim, ["front"], cfg)


def _frames_batch(seed: int) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(seed)
    return {"front": torch.as_tensor(rng.integers(0, 255, (4, 16, 16, 3), dtype=np.uint8))}


# name -> (build a fresh learner, batch of a seed)
CASES: dict[str, tuple[Callable[[], Any], Callable[[int], Any]]] = {
    "sac": (_off_policy("sac"), _transitions),
    "rlpd": (_off_policy("rlpd"), _transitions),
    "crossq": (_off_policy("crossq"), _transitions),
    "bc": (_offline("bc"), _transitions),
    "dagger": (_offline("dagger"), _transitions),
    "iql": (_offline("iql"), _transitions),
    "vla_sft": (_sft, _vla_batch),
    "reward_classifier": (_classifier, _classifier_batch),
    "spatial_autoencoder": (_autoencoder, _frames_batch),
}


def _weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_is_an_algorithm_with_a_one_argument_update(name: str) -> None:
    make, _ = CASES[name]
    algo = make()
    assert isinstance(algo, Algorithm)
    assert list(inspect.signature(algo.update).parameters) == ["batch"]
    assert isinstance(algo.policy(), nn.Module)


@pytest.mark.parametrize("name", sorted(CASES))
def test_state_dict_round_trip_gives_the_same_next_update(name: str) -> None:
    make, batch = CASES[name]
    torch.manual_seed(1)
    original = make()
    first = original.update(batch(0))
    assert first and all(isinstance(v, float) and np.isfinite(v) for v in first.values())
    # a copy taken now: the original's tensors change in place on its next update
    state = copy.deepcopy(original.state_dict())
    torch.manual_seed(2)
    resumed = make()  # other initial weights, overwritten by the state
    resumed.load_state_dict(state)
    nxt = batch(1)
    torch.manual_seed(3)
    expected = original.update(nxt)
    torch.manual_seed(3)
    got = resumed.update(nxt)
    assert got == expected
    torch.testing.assert_close(_weights(resumed.policy()), _weights(original.policy()))


def test_the_served_policy_of_an_off_policy_run_is_the_whole_policy() -> None:
    """The off-policy runner trains a view of its servable policy; ``policy()`` is the policy."""
    from learner.offpolicy.config import OffPolicyConfig
    from learner.offpolicy.nets import ActorView, build

    cfg = from_dict(OffPolicyConfig, {"model": {"hidden": [8], "critic_hidden": [8]}})
    spec = PolicySpec(state_dim=OBS, action_dim=ACT, chunk=1, cameras={})
    policy, learner = build(cfg, spec)
    assert isinstance(learner.actor, ActorView) and learner.policy() is policy
