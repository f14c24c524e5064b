"""Action / state normalisation of the full-size VLAs, from per-dataset statistics (numpy only).

Three schemes, registered by name, each a pair of pure functions over a statistics map:

- ``bounds_q99`` (OpenVLA, OpenVLA-OFT): a model action ``a`` in [-1, 1] means
  ``0.5 (a + 1) (q99 - q01) + q01`` in robot units, on the dimensions where ``mask`` is true
  (the gripper is usually masked out and passed through). Normalising clips to [-1, 1].
- ``mean_std`` (π0): ``(x - mean) / (std + 1e-6)``.
- ``quantile`` (π0.5): ``(x - q01) / (q99 - q01 + 1e-6) * 2 - 1``.

Statistics come as the checkpoints ship them (``dataset_statistics.json`` /
``norm_stats.json``): ``{key: {"q01": [...], "q99": [...], "mean": [...], "std": [...],
"mask": [...]}}``; only the fields a scheme needs are required, and a missing one is named.

>>> s = {"q01": [0.0, -2.0], "q99": [1.0, 2.0], "mask": [True, False]}
>>> unnormalize("bounds_q99", np.array([0.0, 0.5]), s).tolist()
[0.5, 0.5]
>>> normalize("quantile", np.array([1.0]), {"q01": [0.0], "q99": [1.0]}).round(4).tolist()
[1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlinf_contracts.registry import Registry

EPS = 1e-6
Stats = Mapping[str, Any]
SCHEMES: Registry[
    tuple[Callable[[np.ndarray, Stats], np.ndarray], Callable[[np.ndarray, Stats], np.ndarray]]
] = Registry("normalisation")


def _get(stats: Stats, key: str, dim: int) -> np.ndarray:
    if key not in stats:
        raise KeyError(f"normalisation statistics lack '{key}' (have {sorted(stats)})")
    v = np.asarray(stats[key], dtype=np.float64)
    if v.shape[-1] != dim:
        raise ValueError(
            f"normalisation statistic '{key}' has {v.shape[-1]} entries, the data has {dim}"
        )
    return v


def _mask(stats: Stats, dim: int) -> np.ndarray:
    return np.asarray(stats["mask"], dtype=bool) if "mask" in stats else np.ones(dim, dtype=bool)


def _q99_norm(x: np.ndarray, s: Stats) -> np.ndarray:
    lo, hi = _get(s, "q01", x.shape[-1]), _get(s, "q99", x.shape[-1])
    out = np.clip(2.0 * (x - lo) / np.maximum(hi - lo, 1e-8) - 1.0, -1.0, 1.0)
    return np.where(_mask(s, x.shape[-1]), out, x)


def _q99_unnorm(a: np.ndarray, s: Stats) -> np.ndarray:
    lo, hi = _get(s, "q01", a.shape[-1]), _get(s, "q99", a.shape[-1])
    return np.where(_mask(s, a.shape[-1]), 0.5 * (a + 1.0) * (hi - lo) + lo, a)


def _ms_norm(x: np.ndarray, s: Stats) -> np.ndarray:
    return (x - _get(s, "mean", x.shape[-1])) / (_get(s, "std", x.shape[-1]) + EPS)


def _ms_unnorm(x: np.ndarray, s: Stats) -> np.ndarray:
    return x * (_get(s, "std", x.shape[-1]) + EPS) + _get(s, "mean", x.shape[-1])


def _quant_norm(x: np.ndarray, s: Stats) -> np.ndarray:
    lo, hi = _get(s, "q01", x.shape[-1]), _get(s, "q99", x.shape[-1])
    return (x - lo) / (hi - lo + EPS) * 2.0 - 1.0


def _quant_unnorm(x: np.ndarray, s: Stats) -> np.ndarray:
    lo, hi = _get(s, "q01", x.shape[-1]), _get(s, "q99", x.shape[-1])
    return (x + 1.0) / 2.0 * (hi - lo + EPS) + lo


SCHEMES.register("bounds_q99")((_q99_norm, _q99_unnorm))
SCHEMES.register("mean_std")((_ms_norm, _ms_unnorm))
SCHEMES.register("quantile")((_quant_norm, _quant_unnorm))


def normalize(scheme: str, x: np.ndarray, stats: Stats) -> np.ndarray:
    """Robot units -> model units under ``scheme``."""
    return SCHEMES.get(scheme)[0](np.asarray(x, dtype=np.float64), stats)


def unnormalize(scheme: str, x: np.ndarray, stats: Stats) -> np.ndarray:
    """Model units -> robot units under ``scheme``."""
    return SCHEMES.get(scheme)[1](np.asarray(x, dtype=np.float64), stats)
