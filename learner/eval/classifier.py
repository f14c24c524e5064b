"""``rlinf eval`` for reward-classifier checkpoints: accuracy on the run's held-out episodes.

Why not the sim success rate: a classifier is not a policy that acts; what it is judged by is
how often its ``p_success`` agrees with the episode labels. By default the episodes are the ones
its run held out (same store, same seed, same by-episode split as training); ``dataset`` scores
every frame of another episode store instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from learner.checkpoint import load_policy
from learner.models import obs_to_tensors

__all__ = ["evaluate_classifier_checkpoint"]


def _p_success(model: Any, data: dict[str, Any], rows: np.ndarray) -> np.ndarray:
    out = []
    with torch.no_grad():
        for i in range(0, len(rows), 256):
            r = rows[i : i + 256]
            obs = {"state": data["state"][r], "images": {data["camera"]: data["images"][r]}}
            out.append(torch.sigmoid(model.logits(obs_to_tensors(obs))).numpy())
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def evaluate_classifier_checkpoint(path: str, dataset: str | None = None) -> dict[str, Any]:
    """``{"checkpoint", "runner", "iteration", "split", "frames", "accuracy",
    "balanced_accuracy", "fp_rate", "fn_rate", "false_success_episodes"}`` of a
    ``reward_classifier`` checkpoint."""
    from learner.runners.reward_classifier import (
        accuracy,
        defined,
        labelled_stores,
        split_by_episode,
    )

    model, meta = load_policy(path)
    cfg = meta.get("config") or {}
    d, t = cfg.get("data") or {}, cfg.get("train") or {}
    store = dataset or d.get("store")
    if not store:
        raise ValueError(f"{meta['path']}: meta.json names no episode store; pass --dataset DIR")
    stores = [dataset] if dataset else [store, *(d.get("extra_stores") or [])]
    data = labelled_stores(stores, d.get("camera", ""), d.get("last_k", 1), d.get("margin", 0))
    if dataset:
        rows, split = np.arange(len(data["label"])), "dataset"
    else:
        rng = np.random.default_rng(cfg.get("seed", 0))
        _, rows = split_by_episode(data["episode"], d.get("val_fraction", 0.2), rng)
        split = "val"
    p_success = _p_success(model, data, rows)
    scores = accuracy(
        p_success, data["label"][rows], t.get("threshold", 0.5), data["episode"][rows]
    )
    return {
        "checkpoint": meta["path"],
        "runner": "reward_classifier",
        "iteration": meta["iteration"],
        "split": split,
        "store": store,
        "frames": int(len(rows)),
        **{k: defined(v) for k, v in scores.items()},
    }
