"""Training metrics: a tqdm progress bar on the console, TensorBoard scalars, a final JSON.

The bar shows what a person watching wants: iteration, success rate, return, env steps/s, and,
under a wall-clock budget (``train.time_budget_s``), the time left: a run that the budget ends
long before its step count would otherwise show tqdm's ETA for the step count (hours), not when
it will actually stop.
Everything numeric goes to TensorBoard under ``<out_dir>/tb`` (keys with ``/`` group into
sections). Both are optional so tests and benchmarks stay quiet.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

BAR_KEYS = {
    "success_rate": "succ",
    "episode_return": "ret",
    "env_steps_per_s": "sps",
    "weight_version": "w",
}


class MetricsLogger:
    def __init__(
        self,
        out_dir: str | Path,
        total: int,
        start: int = 0,
        tensorboard: bool = True,
        progress: bool = True,
        desc: str = "train",
        time_budget_s: float | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.deadline = None if time_budget_s is None else time.perf_counter() + time_budget_s
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.history: list[dict[str, float]] = []
        self.last: dict[str, float] = {}
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.out_dir / "tb"))
        self.bar = None
        if progress:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, desc=desc, unit="it", dynamic_ncols=True)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        scalars = {
            k: float(v)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
        }
        self.history.append({"iteration": float(step), **scalars})
        self.last.update(scalars)
        if self.writer is not None:
            for k, v in scalars.items():
                self.writer.add_scalar(k, v, step)
        if self.bar is not None:
            post = {short: f"{self.last[k]:.3g}" for k, short in BAR_KEYS.items() if k in self.last}
            if self.deadline is not None:
                left = max(0, round(self.deadline - time.perf_counter()))
                post["budget_left"] = f"{left // 60}:{left % 60:02d}"
            self.bar.set_postfix(post, refresh=False)
            self.bar.update(1)
        else:
            log.debug("iteration %d: %s", step, scalars)

    def write_json(self, final: dict[str, Any], name: str = "metrics.json") -> Path:
        path = self.out_dir / name
        path.write_text(json.dumps({"final": final, "history": self.history}, indent=1))
        return path

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()
