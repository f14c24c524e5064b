"""Checkpoints: exact round trip of weights, optimiser and RNG; path resolution; clear errors."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from learner.checkpoint import (
    checkpoint_dir,
    load_checkpoint,
    load_policy,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from learner.models import PolicySpec, build_policy, obs_to_tensors


def _trained_policy_and_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    policy = build_policy("mlp", PolicySpec(4, 2, chunk=2), hidden=[8, 8], head="tanh_gaussian")
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    for _ in range(3):
        out = policy(obs_to_tensors({"state": np.random.randn(6, 4).astype(np.float32)}))
        loss = out.value.square().mean() - out.dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    policy.norm.update(torch.randn(10, 4) + 3.0)
    return policy, opt


def test_round_trip_restores_weights_optimizer_and_meta(tmp_path) -> None:
    policy, opt = _trained_policy_and_optimizer()
    path = save_checkpoint(
        checkpoint_dir(tmp_path, 7),
        policy,
        iteration=7,
        weight_version=8,
        optimizer=opt,
        config={"name": "x"},
        metrics={"success_rate": 0.5},
    )
    assert sorted(p.name for p in path.iterdir()) == [
        "meta.json",
        "model.safetensors",
        "optimizer.safetensors",
    ]
    assert not list(tmp_path.rglob("*.tmp"))
    restored, meta = load_policy(path)
    assert (
        meta["iteration"] == 7 and meta["weight_version"] == 8 and meta["config"] == {"name": "x"}
    )
    assert meta["model"] == {"name": "mlp", "kwargs": {"hidden": [8, 8], "head": "tanh_gaussian"}}
    for (k, a), (_, b) in zip(policy.state_dict().items(), restored.state_dict().items()):
        assert torch.equal(a, b), k  # includes the normaliser buffers
    opt2 = torch.optim.Adam(restored.parameters(), lr=1e-3)
    opt2.load_state_dict(load_checkpoint(path).optimizer_state)
    st1, st2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert sorted(st1) == sorted(st2)
    for s1, s2 in ((st1[k], st2[k]) for k in st1):
        assert torch.equal(s1["exp_avg"], s2["exp_avg"]) and torch.equal(
            s1["exp_avg_sq"], s2["exp_avg_sq"]
        )
        assert float(s1["step"]) == float(s2["step"])
    # the restored optimiser takes the same next step as the original
    obs = obs_to_tensors({"state": np.ones((3, 4), np.float32)})
    for p_, o_ in ((policy, opt), (restored, opt2)):
        o_.zero_grad()
        p_(obs).value.sum().backward()
        o_.step()
    for a, b in zip(policy.parameters(), restored.parameters()):
        assert torch.equal(a, b)


def test_meta_is_plain_json_without_pickle(tmp_path) -> None:
    policy, opt = _trained_policy_and_optimizer()
    path = save_checkpoint(tmp_path / "c", policy, iteration=1, weight_version=1, optimizer=opt)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["format"] == "rlinf-ros/checkpoint/1"
    assert set(meta["rng"]) == {"python", "numpy", "torch"}
    assert meta["optimizer"]["param_groups"][0]["lr"] == 1e-3
    assert meta["spec"]["chunk"] == 2


def test_rng_state_round_trip() -> None:
    state = rng_state()
    draws = (random.random(), np.random.rand(), torch.rand(1).item())
    set_rng_state(json.loads(json.dumps(state)))
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == draws


def test_resolve_latest_from_run_dir_and_error_for_missing(tmp_path) -> None:
    policy, _ = _trained_policy_and_optimizer()
    for it in (5, 10):
        save_checkpoint(checkpoint_dir(tmp_path, it), policy, iteration=it, weight_version=it + 1)
    assert load_policy(tmp_path)[1]["iteration"] == 10
    assert load_policy(tmp_path / "checkpoints")[1]["iteration"] == 10
    assert load_policy(checkpoint_dir(tmp_path, 5) / "model.safetensors")[1]["iteration"] == 5
    with pytest.raises(FileNotFoundError, match="meta.json"):
        load_policy(tmp_path / "nothing_here")
