"""Checkpoints: safetensors for tensors, JSON for everything else; no pickle anywhere.

Layout (one directory per save, written to a temp dir then renamed, so a crash mid-save never
leaves a half checkpoint that ``resume`` would pick up)::

    <out_dir>/checkpoints/iter_000010/
        model.safetensors       policy state_dict (incl. normaliser buffers)
        optimizer.safetensors   optimiser tensors (Adam moments, step counts)
        meta.json               format, iteration, weight_version, model name/kwargs, spec,
                                config, optimiser param groups, RNG states, metrics

Every runner writes it through :func:`write_checkpoint`, at :func:`checkpoint_dir` (the run
directory's layout, ``learner.metrics``); an LLM checkpoint
(:func:`learner.llm.model.save_model`) also holds the HF ``config.json`` and the tokenizer
files beside ``model.safetensors``, so it loads with ``from_pretrained`` too.

``load_policy(path)`` rebuilds the model from ``meta.json`` alone (the policy server uses it);
``path`` may be the iteration dir, a ``checkpoints`` dir or a run's ``out_dir`` (latest wins).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from learner.metrics import CHECKPOINTS, checkpoint_dir  # noqa: F401  (re-exported: the layout)
from learner.models import Policy, PolicySpec, build_policy

log = logging.getLogger(__name__)

FORMAT = "rlinf-ros/checkpoint/1"
MODEL_FILE, OPTIM_FILE, META_FILE = "model.safetensors", "optimizer.safetensors", "meta.json"


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` returns."""

    path: Path
    meta: dict[str, Any]
    model_state: dict[str, torch.Tensor]
    optimizer_state: dict[str, Any] | None  # torch optimiser state_dict, ready to load

    @property
    def iteration(self) -> int:
        return int(self.meta["iteration"])

    @property
    def weight_version(self) -> int:
        return int(self.meta.get("weight_version", 0))


# -- RNG streams ------------------------------------------------------------------------------
def rng_state() -> dict[str, Any]:
    """Python, numpy (legacy global) and torch CPU RNG states as JSON-able lists."""
    py = random.getstate()
    np_state = np.random.get_state()
    return {
        "python": [py[0], list(py[1]), py[2]],
        "numpy": [
            np_state[0],
            np_state[1].tolist(),
            int(np_state[2]),
            int(np_state[3]),
            float(np_state[4]),
        ],
        "torch": torch.get_rng_state().tolist(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`rng_state`."""
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state["numpy"]
    np.random.set_state((n[0], np.asarray(n[1], dtype=np.uint32), n[2], n[3], n[4]))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))


# -- optimiser state <-> (tensors, json) --------------------------------------------------------
def _split_optimizer_state(sd: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, entry in sd["state"].items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{idx}.{name}"] = value.detach().cpu().contiguous().clone()
            else:
                scalars.setdefault(str(idx), {})[name] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _join_optimizer_state(tensors: dict[str, torch.Tensor], js: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        _, idx, name = key.split(".", 2)
        state.setdefault(int(idx), {})[name] = value
    for idx, entry in js.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(entry)
    return {"state": dict(sorted(state.items())), "param_groups": js["param_groups"]}


# -- save / load ------------------------------------------------------------------------------
def write_checkpoint(
    path: str | Path,
    model_state: dict[str, torch.Tensor],
    model_meta: dict[str, Any],
    *,
    iteration: int,
    weight_version: int,
    spec: dict[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    config: dict[str, Any] | None = None,
    metrics: dict[str, float] | None = None,
    rng: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    beside: Callable[[Path], None] | None = None,
) -> Path:
    """Write the one checkpoint format at ``path`` (atomically) and return it; any runner's model.

    ``model_meta`` says how to rebuild the model (``{"name", "kwargs"}``); ``spec`` is the
    policy's I/O layout (embodied policies); ``extra`` adds top-level meta keys; ``beside``
    writes runner-specific files into the directory before it is published (an LLM's HF
    ``config.json`` and tokenizer files, so the directory also loads with ``from_pretrained``).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # one owned CPU copy per tensor: tied weights (shared storage) are saved under each name
    tensors = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model_state.items()}
    save_file(tensors, str(tmp / MODEL_FILE), metadata={"format": "pt"})
    optim_json = None
    if optimizer is not None:
        optim_tensors, optim_json = _split_optimizer_state(optimizer.state_dict())
        save_file(optim_tensors, str(tmp / OPTIM_FILE))
    if beside is not None:
        beside(tmp)
    meta = {
        "format": FORMAT,
        "runner": (config or {}).get("runner", "embodied"),
        "created_unix": time.time(),
        "iteration": int(iteration),
        "weight_version": int(weight_version),
        "model": model_meta,
        "spec": spec,
        "config": config or {},
        "optimizer": optim_json,
        "rng": rng if rng is not None else rng_state(),
        "metrics": metrics or {},
        **(extra or {}),
    }
    (tmp / META_FILE).write_text(json.dumps(meta, indent=1, default=_json_default))
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    log.info(
        "saved checkpoint %s (iteration %d, weight version %d)", path, iteration, weight_version
    )
    return path


def save_checkpoint(
    path: str | Path,
    policy: Policy,
    *,
    iteration: int,
    weight_version: int,
    optimizer: torch.optim.Optimizer | None = None,
    config: dict[str, Any] | None = None,
    metrics: dict[str, float] | None = None,
    rng: dict[str, Any] | None = None,
) -> Path:
    """Checkpoint an embodied policy: :func:`write_checkpoint` with its registry name and spec."""
    model_meta = {
        "name": getattr(policy, "model_name", "mlp"),
        "kwargs": getattr(policy, "model_kwargs", {}),
    }
    return write_checkpoint(
        path,
        policy.state_dict(),
        model_meta,
        iteration=iteration,
        weight_version=weight_version,
        spec=policy.spec.to_dict(),
        optimizer=optimizer,
        config=config,
        metrics=metrics,
        rng=rng,
    )


def _json_default(obj: Any) -> Any:
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    raise TypeError(f"checkpoint meta value {obj!r} of type {type(obj).__name__} is not JSON-able")


def resolve_checkpoint(path: str | Path) -> Path:
    """The iteration directory meant by ``path`` (itself, or the latest one under it)."""
    p = Path(path)
    if p.is_file():
        p = p.parent
    if (p / META_FILE).is_file():
        return p
    for root in (p, p / CHECKPOINTS):
        candidates = sorted(d for d in root.glob("iter_*") if (d / META_FILE).is_file())
        if candidates:
            return candidates[-1]
    raise FileNotFoundError(
        f"no checkpoint at '{path}': expected a directory with {META_FILE} (e.g. "
        "<out_dir>/checkpoints/iter_000010), a checkpoints/ directory, or a run out_dir"
    )


def read_meta(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """(the checkpoint directory ``path`` means, its meta.json) without reading any tensor."""
    p = resolve_checkpoint(path)
    return p, json.loads((p / META_FILE).read_text())


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (see :func:`resolve_checkpoint`)."""
    p = resolve_checkpoint(path)
    meta = json.loads((p / META_FILE).read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(
            f"{p / META_FILE}: unknown checkpoint format {meta.get('format')!r}, "
            f"expected {FORMAT!r}"
        )
    optim = None
    if meta.get("optimizer") is not None and (p / OPTIM_FILE).is_file():
        optim = _join_optimizer_state(load_file(str(p / OPTIM_FILE)), meta["optimizer"])
    return Checkpoint(
        path=p, meta=meta, model_state=load_file(str(p / MODEL_FILE)), optimizer_state=optim
    )


def policy_spec_of(meta: dict[str, Any], where: str | Path = "") -> PolicySpec:
    """The robot-facing spec a checkpoint's policy was built with.

    Why a user error and not a KeyError: an LLM checkpoint (``runner: reasoning``) shares the
    format but holds no policy that acts on a robot, so asking for its robot spec (``rlinf spec``,
    the policy server) is a mistake to name, with what to do instead.
    """
    if not meta.get("spec"):
        from rlinf_contracts.config import ConfigError

        model = (meta.get("model") or {}).get("name")
        raise ConfigError(
            f"checkpoint {where or meta.get('path', '')}: runner {meta.get('runner')!r} saved "
            f"model {model!r} with no robot spec; the policy wire and rlinf spec take "
            "checkpoints of policies that act (embodied, offpolicy, offline, vla_sft, "
            "reward_classifier); an LLM checkpoint is scored by rlinf eval and served as text "
            "completions by rlinf serve"
        )
    return PolicySpec.from_dict(meta["spec"])


def load_policy(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[Policy, dict[str, Any]]:
    """Rebuild the policy of a checkpoint from its meta and load its weights (eval mode)."""
    ckpt = load_checkpoint(path)
    model = ckpt.meta["model"]
    spec = policy_spec_of(ckpt.meta, ckpt.path)
    policy = build_policy(model["name"], spec, **model["kwargs"])
    policy.load_state_dict(ckpt.model_state)
    policy.to(device).eval()
    meta = dict(ckpt.meta, path=str(ckpt.path))
    return policy, meta
