"""Checkpoints of an off-policy run, in the one checkpoint format (``learner.checkpoint``).

``model.safetensors`` holds the servable actor (``rlinf serve`` / ``rlinf eval`` / the final eval
load it with ``load_policy``, model name ``sac``); beside it ``learner.safetensors`` (critics,
target critics, temperature), ``learner_optim.safetensors`` + ``learner.json`` (the three Adam
states, the counters, the replay sampler's RNG). ``meta.json`` also names the episode store
that holds the online transitions: a restart loads the checkpoint and refills the replay from
that store (``OffPolicyLearner.refill``), then continues counting where the checkpoint stopped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from learner.checkpoint import (
    _join_optimizer_state,
    _split_optimizer_state,
    load_checkpoint,
    set_rng_state,
    write_checkpoint,
)
from learner.offpolicy.learner import OffPolicyLearner
from learner.offpolicy.nets import critic_parts

PARTS_FILE, OPTIM_FILE, STATE_FILE = (
    "learner.safetensors",
    "learner_optim.safetensors",
    "learner.json",
)


def _optimizers(core: OffPolicyLearner) -> dict[str, torch.optim.Optimizer]:
    lr = core.learner
    return {"actor_opt": lr.actor_opt, "critic_opt": lr.critic_opt, "alpha_opt": lr.alpha_opt}


def _write_learner(core: OffPolicyLearner, d: Path) -> None:
    parts = {
        f"{name}.{k}": v.detach().cpu().clone().contiguous()
        for name, mod in critic_parts(core.learner).items()
        for k, v in mod.state_dict().items()
    }
    save_file(parts, str(d / PARTS_FILE))
    tensors: dict[str, torch.Tensor] = {}
    optim_json: dict[str, Any] = {}
    for name, opt in _optimizers(core).items():
        t, js = _split_optimizer_state(opt.state_dict())
        tensors.update({f"{name}.{k}": v for k, v in t.items()})
        optim_json[name] = js
    save_file(tensors, str(d / OPTIM_FILE))
    state = {
        "optimizers": optim_json,
        "counters": core.counters(),
        "replay_rng": core.rng.bit_generator.state,
    }
    (d / STATE_FILE).write_text(json.dumps(state))


def save(
    core: OffPolicyLearner,
    path: Path,
    iteration: int,
    version: int,
    config: dict[str, Any],
    metrics: dict[str, float],
    episode_store: str | None,
) -> Path:
    policy = core.policy
    return write_checkpoint(
        path,
        policy.state_dict(),
        {"name": "sac", "kwargs": policy.model_kwargs},
        iteration=iteration,
        weight_version=version,
        spec=policy.spec.to_dict(),
        config=config,
        metrics=metrics,
        extra={"counters": core.counters(), "episode_store": episode_store},
        beside=lambda d: _write_learner(core, d),
    )


def _prefixed(tensors: dict[str, torch.Tensor], name: str) -> dict[str, torch.Tensor]:
    return {k[len(name) + 1 :]: v for k, v in tensors.items() if k.startswith(name + ".")}


def load(core: OffPolicyLearner, path: str | Path) -> dict[str, Any]:
    """Restore networks, optimisers, counters and RNGs from a checkpoint; returns its meta."""
    ckpt = load_checkpoint(path)
    core.policy.load_state_dict(ckpt.model_state)
    parts = load_file(str(ckpt.path / PARTS_FILE))
    for name, mod in critic_parts(core.learner).items():
        mod.load_state_dict(_prefixed(parts, name))
    state = json.loads((ckpt.path / STATE_FILE).read_text())
    optim = load_file(str(ckpt.path / OPTIM_FILE))
    for name, opt in _optimizers(core).items():
        opt.load_state_dict(
            _join_optimizer_state(_prefixed(optim, name), state["optimizers"][name])
        )
    core.set_counters(state["counters"])
    core.rng.bit_generator.state = state["replay_rng"]
    set_rng_state(ckpt.meta["rng"])
    return dict(ckpt.meta, path=str(ckpt.path))
