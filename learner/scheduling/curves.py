"""Measured cost curves: seconds per call as a function of batch size, and the profile cache.

A :class:`Curve` holds a few measured points ``{batch: seconds}`` and predicts other batch
sizes with the affine law ``t(b) = fixed + per_item * b`` fitted through them (least squares;
one point = proportional). The fixed part is what micro-batching pays once per micro-batch
(Python and kernel launch overhead), the per-item part what it splits.

>>> c = Curve({8: 0.003, 16: 0.005, 32: 0.009})
>>> round(c(64), 4), round(c.fixed, 4)
(0.017, 0.001)
>>> Curve({10: 0.02})(5)
0.01
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Curve:
    points: dict[int, float] = field(default_factory=dict)

    @property
    def _fit(self) -> tuple[float, float]:
        pts = sorted((int(b), float(t)) for b, t in self.points.items())
        if not pts:
            return 0.0, 0.0
        if len(pts) == 1:
            return 0.0, pts[0][1] / max(pts[0][0], 1)
        n = len(pts)
        mb = sum(b for b, _ in pts) / n
        mt = sum(t for _, t in pts) / n
        var = sum((b - mb) ** 2 for b, _ in pts)
        slope = sum((b - mb) * (t - mt) for b, t in pts) / var if var else 0.0
        slope = max(slope, 0.0)
        return max(mt - slope * mb, 0.0), slope

    @property
    def fixed(self) -> float:
        return self._fit[0]

    @property
    def per_item(self) -> float:
        return self._fit[1]

    def __call__(self, batch: float) -> float:
        """Seconds for one call on ``batch`` items (the measured value where there is one)."""
        if int(batch) in self.points and batch == int(batch):
            return float(self.points[int(batch)])
        fixed, slope = self._fit
        return fixed + slope * float(batch)

    def scaled(self, factor: float) -> Curve:
        """The same curve with every time multiplied by ``factor`` (a calibration)."""
        return Curve({b: t * factor for b, t in self.points.items()})

    def to_dict(self) -> dict[str, float]:
        return {str(k): v for k, v in self.points.items()}

    @classmethod
    def from_dict(cls, d: dict[str, float]) -> Curve:
        return cls({int(k): float(v) for k, v in d.items()})


def cache_dir() -> Path:
    """``$RLINF_PROFILE_DIR`` or ``~/.cache/rlinf-ros/profiles``."""
    return Path(
        os.environ.get("RLINF_PROFILE_DIR", Path.home() / ".cache" / "rlinf-ros" / "profiles")
    )


def machine_tag() -> str:
    """What makes profiles of one machine incomparable with another's."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return f"{platform.node()}-{platform.machine()}-{cores}c-{gpus or 'nogpu'}"


def workload_key(kind: str, workload: dict[str, Any]) -> str:
    """Stable key of a workload (the config minus placement, depth and run bookkeeping).

    >>> workload_key("embodied", {"a": 1}) == workload_key("embodied", {"a": 1})
    True
    """
    text = json.dumps(
        {"kind": kind, "machine": machine_tag(), "w": workload}, sort_keys=True, default=str
    )
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def load_cached(key: str) -> dict[str, Any] | None:
    path = cache_dir() / f"{key}.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def store_cached(key: str, data: dict[str, Any]) -> Path:
    path = cache_dir() / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)
    return path


def reference_s(repeats: int = 30) -> float:
    """Seconds per round of a fixed single-threaded kernel (Python loop + small numpy ops), run
    back to back for ``repeats`` rounds (~0.3 s on a quiet core): how fast this machine runs
    *now*. Sustained on purpose: on a shared machine short bursts get a fresh time slice and
    look fast, while a worker's minutes of stepping get its fair share of a core. A profile
    stores it; a later prediction scales by ``reference_s() / profile.ref_s``."""
    import time

    import numpy as np

    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    t0 = time.perf_counter()
    for _ in range(repeats):
        x = a
        for _ in range(200):
            x = np.tanh(x @ a * 0.01)
        sum(i * i for i in range(20_000))
    return (time.perf_counter() - t0) / repeats
