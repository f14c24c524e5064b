"""Across-seed aggregate of a score: interquartile mean (IQM) and a stratified bootstrap interval.

Why IQM and a bootstrap interval, not mean +- std: with the 3-10 seeds an RL run can afford, the
mean is pulled by one lucky or collapsed seed and the std says nothing about how sure we are of
the aggregate. IQM (the mean of the middle half) is robust to one outlier yet uses more of the
data than the median; a percentile bootstrap over seeds gives an interval that does not assume
normal scores (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical Precipice").

The definitions are rliable's (``rliable.metrics.aggregate_iqm``,
``rliable.library.get_interval_estimates`` with ``method='percentile'``): IQM is the 25 %
trimmed mean of all scores (``int(0.25 * n)`` cut from each end, as ``scipy.stats.trim_mean``),
the bootstrap resamples runs with replacement within each task (stratified) and the interval is
the percentiles of the resampled statistic (numpy's linear interpolation). They are written here
in numpy because rliable needs ``arch<8``, whose 7.x releases do not import under pandas 3 that
the data stack (``rlinf_data``) uses; the numbers were checked against rliable 1.2.0 (pandas 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Statistic = Callable[[np.ndarray], np.ndarray]
"""(reps, runs, tasks) resamples -> (reps,) statistic: vectorised over the bootstrap draws."""

DEFAULT_REPS = 50_000
"""rliable's default number of bootstrap draws."""


def iqm(scores: np.ndarray | list[float]) -> float:
    """Interquartile mean of all ``scores`` (any shape): the 25 % trimmed mean.

    >>> iqm([0.0, 0.2, 0.4, 0.9, 1.0])  # int(0.25 * 5) = 1 cut from each end: (0.2+0.4+0.9)/3
    0.5
    >>> iqm([1, 2, 3, 4, 5, 6, 7, 100])  # 2 cut from each end: (3+4+5+6)/4
    4.5
    """
    flat = np.sort(np.asarray(scores, dtype=float).ravel())
    if flat.size == 0:
        raise ValueError("iqm of no scores")
    cut = int(0.25 * flat.size)
    return float(flat[cut : flat.size - cut].mean())


def iqm_of_draws(draws: np.ndarray) -> np.ndarray:
    """:func:`iqm` of each bootstrap draw: ``(reps, runs, tasks)`` -> ``(reps,)``."""
    flat = np.sort(draws.reshape(draws.shape[0], -1), axis=1)
    cut = int(0.25 * flat.shape[1])
    return flat[:, cut : flat.shape[1] - cut].mean(axis=1)


def percentile_interval(stats: np.ndarray | list[float], size: float = 0.95) -> tuple[float, float]:
    """The central ``size`` interval of the bootstrap statistics (the percentile method).

    >>> percentile_interval([0.0, 1.0, 2.0, 3.0, 4.0], size=0.5)  # 25th, 75th percentile
    (1.0, 3.0)
    """
    if not 0.0 < size < 1.0:
        raise ValueError(f"interval size must be in (0, 1), got {size}")
    tail = 100.0 * (1.0 - size) / 2.0
    low, high = np.percentile(np.asarray(stats, dtype=float), [tail, 100.0 - tail])
    return float(low), float(high)


def stratified_draws(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``reps`` resamples of a ``(runs, tasks)`` matrix: runs drawn with replacement, per task.

    Stratified: each task keeps its own runs, so a resample never trades one task's scores for
    another's; with one task this is the ordinary bootstrap over seeds.
    """
    runs, tasks = scores.shape
    index = rng.integers(0, runs, size=(reps, runs, tasks))
    return scores[index, np.arange(tasks)]


def bootstrap_ci(
    scores: np.ndarray | list[float],
    statistic: Statistic = iqm_of_draws,
    size: float = 0.95,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
) -> tuple[float, float]:
    """``size`` stratified percentile-bootstrap interval of ``statistic`` over ``scores``.

    ``scores`` is one value per run (seeds of one config) or a ``(runs, tasks)`` matrix. The
    draws come from ``seed``, so a report re-rendered from the same scores has the same interval.

    >>> bootstrap_ci([0.75, 0.75, 0.75])  # every resample is the same: the interval is the point
    (0.75, 0.75)
    >>> bootstrap_ci([0.0, 1.0])  # resampled means 0, 0.5, 1 (1/4, 1/2, 1/4): 2.5th %ile 0
    (0.0, 1.0)
    """
    matrix = np.asarray(scores, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix[:, None]
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"scores must be (runs,) or (runs, tasks), got shape {matrix.shape}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    draws = stratified_draws(matrix, reps, np.random.default_rng(seed))
    return percentile_interval(statistic(draws), size)


@dataclass(frozen=True)
class Estimate:
    """IQM of one metric over seeds, its interval and the values it came from."""

    iqm: float
    low: float
    high: float
    values: tuple[float, ...]

    def text(self, digits: int = 2) -> str:
        """``0.95 [0.90, 1.00]``: how reports print an estimate.

        >>> Estimate(0.95, 0.9, 1.0, (0.9, 1.0)).text()
        '0.95 [0.90, 1.00]'
        """
        return f"{self.iqm:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def estimate(
    values: list[float], size: float = 0.95, reps: int = DEFAULT_REPS, seed: int = 0
) -> Estimate:
    """IQM and bootstrap interval of one value per seed.

    >>> estimate([0.5, 0.5]).text()
    '0.50 [0.50, 0.50]'
    """
    low, high = bootstrap_ci(values, size=size, reps=reps, seed=seed)
    return Estimate(iqm(values), low, high, tuple(float(v) for v in values))


def iqm_band(
    curves: np.ndarray, size: float = 0.95, reps: int = 10_000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IQM and percentile-bootstrap band of ``(runs, points)`` curves, point by point.

    Each draw resamples whole runs (one index set for every point, as rliable does for score
    curves), so the band follows the runs rather than mixing seeds within a curve.

    >>> mid, low, high = iqm_band(np.array([[0.0, 1.0], [0.0, 1.0]]))
    >>> mid.tolist(), low.tolist(), high.tolist()
    ([0.0, 1.0], [0.0, 1.0], [0.0, 1.0])
    """
    matrix = np.asarray(curves, dtype=float)
    runs, _ = matrix.shape
    index = np.random.default_rng(seed).integers(0, runs, size=(reps, runs))
    draws = np.sort(matrix[index], axis=1)  # (reps, runs, points)
    cut = int(0.25 * runs)
    stats = draws[:, cut : runs - cut].mean(axis=1)  # (reps, points)
    tail = 100.0 * (1.0 - size) / 2.0
    low, high = np.percentile(stats, [tail, 100.0 - tail], axis=0)
    ordered = np.sort(matrix, axis=0)
    return ordered[cut : runs - cut].mean(axis=0), low, high
