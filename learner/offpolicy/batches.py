"""Replay samples -> learner batches, with DrQ's random-shift augmentation of images.

A replay sample (``rlinf_data.replay.ReplayBuffer.sample``) is numpy: ``obs`` / ``next_obs``
(``state``, ``images``), n-step ``reward``, ``discount`` (``gamma^m``, 0 after a terminal step).
The SAC-family learners take ``done`` and a ``gamma``; with ``gamma = 1`` (see
``learner.offpolicy.nets``) ``done = 1 - discount`` gives ``r + discount * V(s')`` exactly.

Random shift (DrQ, Kostrikov et al. 2020): pad every image by ``pad`` pixels (edge replicated)
and crop back to its size at a random offset per sample; ``obs`` and ``next_obs`` are shifted
independently, and the actor and critic both see the shifted images.

>>> imgs = np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3)
>>> random_shift(imgs, 2, np.random.default_rng(0)).shape
(2, 4, 4, 3)
>>> np.array_equal(random_shift(imgs, 0, np.random.default_rng(0)), imgs)
True
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor


def random_shift(images: np.ndarray, pad: int, rng: np.random.Generator) -> np.ndarray:
    """``uint8 [B, H, W, C]`` shifted by up to ``pad`` pixels in each direction, per sample."""
    if pad <= 0:
        return images
    b, h, w, _ = images.shape
    padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode="edge")
    dy = rng.integers(0, 2 * pad + 1, size=b)
    dx = rng.integers(0, 2 * pad + 1, size=b)
    out = np.empty_like(images)
    for i in range(b):  # one slice copy per sample: ~50x faster than a 3-array fancy-index gather
        out[i] = padded[i, dy[i] : dy[i] + h, dx[i] : dx[i] + w]
    return out


def obs_tensors(
    obs: dict[str, Any], cameras: list[str], pad: int = 0, rng: np.random.Generator | None = None
) -> Tensor | dict[str, Any]:
    """The learner's view of a numpy observation batch: the state tensor when no camera is read,
    else ``{"state", "images": {cam}}`` (images shifted when ``pad > 0``)."""
    state = torch.as_tensor(np.asarray(obs["state"], np.float32))
    if not cameras:
        return state
    rng = rng or np.random.default_rng()
    images = {
        c: torch.as_tensor(random_shift(np.asarray(obs["images"][c]), pad, rng)) for c in cameras
    }
    return {"state": state, "images": images}


def to_batch(
    sample: dict[str, Any], cameras: list[str], pad: int = 0, rng: np.random.Generator | None = None
) -> dict[str, Any]:
    """A learner batch (``obs``, ``next_obs``, ``action``, ``reward``, ``done``) from a replay
    sample."""
    return {
        "obs": obs_tensors(sample["obs"], cameras, pad, rng),
        "next_obs": obs_tensors(sample["next_obs"], cameras, pad, rng),
        "action": torch.as_tensor(sample["action"]),
        "reward": torch.as_tensor(sample["reward"]),
        "done": torch.as_tensor(1.0 - sample["discount"]),
    }


def split_sample(
    sample: dict[str, Any], parts: int, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """One big replay sample as ``parts`` equal batches (one sampling call for several updates).
    Rows are shuffled first: the replay groups them by source, and every batch must mix them."""
    perm = rng.permutation(len(sample["action"]))

    def cut(x: Any, i: int) -> Any:
        if isinstance(x, dict):
            return {k: cut(v, i) for k, v in x.items()}
        n = len(x) // parts
        return x[perm[i * n : (i + 1) * n]]

    return [cut(sample, i) for i in range(parts)]
