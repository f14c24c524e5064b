"""Policies: every head honours the ActionDistribution contract, CNN path, normaliser, registry."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learner.models import MODELS, PolicySpec, build_policy, obs_to_tensors
from learner.models.encoders import RunningNorm
from rlinf_contracts.registry import UnknownNameError

HEADS = ["gaussian", "tanh_gaussian", "binned"]


def _obs(batch: int = 5, dim: int = 4, cams: dict | None = None) -> dict:
    rng = np.random.default_rng(0)
    obs = {
        "state": rng.normal(size=(batch, dim)).astype(np.float32),
        "images": {},
        "instruction": [],
    }
    for name, (h, w) in (cams or {}).items():
        obs["images"][name] = rng.integers(0, 255, size=(batch, h, w, 3), dtype=np.uint8)
    return obs


@pytest.mark.parametrize("head", HEADS)
def test_head_contract_shapes_and_logprob_consistency(head: str) -> None:
    torch.manual_seed(0)
    policy = build_policy(
        "mlp", PolicySpec(state_dim=4, action_dim=2, chunk=3), hidden=[16], head=head
    )
    out = policy(obs_to_tensors(_obs()))
    actions, logp = out.dist.sample()
    assert actions.shape == (5, 3, 2) and logp.shape == (5,) and out.value.shape == (5,)
    # the log-prob returned with a sample equals log_prob() of the same actions
    torch.testing.assert_close(out.dist.log_prob(actions), logp, atol=1e-4, rtol=1e-4)
    mode = out.dist.mode()
    assert mode.shape == (5, 3, 2) and mode.abs().max() <= 1.0
    assert out.dist.entropy().shape == (5,)
    # gradients reach the head through log_prob
    out.dist.log_prob(actions.detach()).sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.head.parameters())


def test_binned_mode_is_the_most_likely_action() -> None:
    torch.manual_seed(0)
    policy = build_policy(
        "mlp", PolicySpec(4, 2), hidden=[16], head="binned", head_kwargs={"n_bins": 7}
    )
    with torch.no_grad():
        policy.head.logits.bias.normal_(0, 3.0)  # make the distribution peaked
    dist = policy(obs_to_tensors(_obs())).dist
    mode_lp = dist.log_prob(dist.mode())
    for _ in range(20):
        a, lp = dist.sample()
        assert torch.all(lp <= mode_lp + 1e-5)
    # actions are bin centres of 7 bins over [-1, 1]
    centres = -1 + (np.arange(7) + 0.5) * 2 / 7
    assert (np.abs(dist.mode().numpy()[..., None] - centres).min(-1) < 1e-5).all()


def test_act_returns_numpy_and_deterministic_mode() -> None:
    policy = build_policy("mlp", PolicySpec(4, 2), hidden=[16])
    a1, lp1, v1 = policy.act(_obs(), deterministic=True)
    a2, _, _ = policy.act(_obs(), deterministic=True)
    assert (
        a1.dtype == np.float32 and a1.shape == (5, 1, 2) and lp1.shape == (5,) and v1.shape == (5,)
    )
    np.testing.assert_array_equal(a1, a2)


def test_cnn_policy_uses_images_and_names_missing_camera() -> None:
    spec = PolicySpec(4, 2, cameras={"wrist": (24, 24)})
    policy = build_policy("cnn", spec, hidden=[16], cnn_channels=[8, 8], image_feat_dim=16)
    obs = _obs(cams={"wrist": (24, 24)})
    a, _, v = policy.act(obs, deterministic=True)
    assert a.shape == (5, 1, 2)
    obs2 = dict(obs, images={"wrist": np.zeros_like(obs["images"]["wrist"])})
    _, _, v2 = policy.act(obs2, deterministic=True)
    assert not np.allclose(v, v2)  # the image changes the output
    with pytest.raises(KeyError, match="wrist"):
        policy.act(_obs(), deterministic=True)
    with pytest.raises(ValueError, match="no cameras"):
        build_policy("cnn", PolicySpec(4, 2))


def test_running_norm_merges_batches_like_one_big_batch() -> None:
    x = torch.randn(300, 3) * torch.tensor([1.0, 5.0, 0.1]) + torch.tensor([2.0, -1.0, 0.0])
    norm = RunningNorm(3)
    for part in torch.split(x, [100, 50, 150]):
        norm.update(part)
    torch.testing.assert_close(norm.mean, x.mean(0), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(norm.var, x.var(0, unbiased=False), atol=1e-3, rtol=1e-3)
    z = norm(x)
    assert abs(float(z.mean())) < 1e-3 and abs(float(z.std()) - 1.0) < 1e-2


def test_build_policy_records_name_and_kwargs_and_rejects_unknown() -> None:
    policy = build_policy("mlp", PolicySpec(4, 2), hidden=[8, 8], head="tanh_gaussian")
    assert policy.model_name == "mlp" and policy.model_kwargs == {
        "hidden": [8, 8],
        "head": "tanh_gaussian",
    }
    assert {"mlp", "cnn"} <= set(MODELS.names())
    with pytest.raises(UnknownNameError, match="mlp"):
        build_policy("mpl", PolicySpec(4, 2))
