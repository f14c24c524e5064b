"""The run directory every runner writes: its layout, the ``metrics.json`` schema, the writers.

Why one module: people, ``rlinf eval`` / ``serve`` / ``spec``, the scheduler and the benchmarks
read any runner's run the same way, so every runner (embodied PPO / GRPO, off-policy SAC / RLPD /
CrossQ, offline BC / IQL / DAgger, VLA SFT, reward classifier, LLM reasoning and agentic) writes
through here::

    <train.out_dir>/
        checkpoints/iter_000010/   one checkpoint per save (:func:`checkpoint_dir`)
        metrics.json               {"final": {...}, "history": [row, ...]}   (:func:`write_run`)
        curves.png                 learning curves (learner.eval.curves.write_curves)
        tb/                        TensorBoard scalars (:class:`MetricsLogger` live, or write_run)

Every history row has :data:`ROW_KEYS`; every ``final`` has :data:`FINAL_KEYS`; a quantity that
several runners have carries the same name in each (:data:`SHARED_KEYS`). A resumed run appends
to the history it resumed from (:func:`prior_history`).

:class:`MetricsLogger` is the live side: a tqdm bar on the console (iteration, success rate,
return, env steps/s, and under ``train.time_budget_s`` the time left -- tqdm's ETA for the step
count would be hours past the real stop) and TensorBoard scalars under ``tb/`` (keys with ``/``
group into sections). Both are optional so tests and benchmarks stay quiet.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CHECKPOINTS, METRICS, CURVES, TENSORBOARD = "checkpoints", "metrics.json", "curves.png", "tb"
ROW_KEYS = ("iteration", "time/wall_s")
"""In every history row: the row's index in the run (PPO iteration, off-policy / offline / SFT log
row, classifier epoch, LLM step) and wall-clock seconds since the run began (continued on
resume)."""
FINAL_KEYS = ("runner", "iterations", "elapsed_s", "checkpoint", "out_dir", "curves")
"""In every ``final``: the runner, rows / iterations done, seconds, the last checkpoint (None
when a run saves none), the run directory and ``curves.png`` (None when nothing was drawn)."""
SHARED_KEYS = {
    "env_steps": "environment steps so far (runners that step an env)",
    "updates": "gradient updates so far (runners that count them)",
    "success_rate": "training success rate over the last 100 episodes",
    "episode_return": "mean training episode return",
    "eval": "final held-out evaluation, {split: {success_rate, episodes, ...}} or {metric: value}",
}
"""One name for one quantity, in rows and ``final``, for the runners that have it."""

BAR_KEYS = {
    "success_rate": "succ",
    "episode_return": "ret",
    "env_steps_per_s": "sps",
    "weight_version": "w",
    "learner/utd_effective": "utd",  # updates per arrived transition (learner.offpolicy.utd)
    "learner/backlog": "owed",
}


def checkpoint_dir(out_dir: str | Path, iteration: int) -> Path:
    """``<out_dir>/checkpoints/iter_<iteration:06d>``: where every runner saves an iteration.

    >>> checkpoint_dir("runs/x", 10).as_posix()
    'runs/x/checkpoints/iter_000010'
    """
    return Path(out_dir) / CHECKPOINTS / f"iter_{iteration:06d}"


def read_metrics(out_dir: str | Path) -> dict[str, Any]:
    """``{"final", "history"}`` of a run directory's ``metrics.json``."""
    return json.loads((Path(out_dir) / METRICS).read_text())


def prior_history(out_dir: str | Path, before_iteration: int) -> list[dict[str, Any]]:
    """Rows of ``metrics.json`` below ``before_iteration``: what a resumed run appends to."""
    p = Path(out_dir) / METRICS
    if not p.is_file():
        return []
    try:
        rows = json.loads(p.read_text()).get("history", [])
    except (ValueError, AttributeError):
        return []
    return [
        r
        for r in rows
        if isinstance(r, dict) and r.get("iteration", before_iteration) < before_iteration
    ]


def _scalars(metrics: dict[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
    }


def _eval_scalars(results: Any) -> dict[str, float]:
    """``eval/<split>/<key>`` of a held-out result (per split) or ``eval/<key>`` (flat)."""
    if not isinstance(results, dict):
        return {}
    out = {}
    for split, res in results.items():
        if isinstance(res, dict):
            out.update({f"eval/{split}/{k}": v for k, v in _scalars(res).items()})
        else:
            out.update({f"eval/{k}": v for k, v in _scalars({split: res}).items()})
    return out


def _dump(path: Path, final: dict[str, Any], history: list[dict[str, Any]]) -> Path:
    """``metrics.json`` written whole (temp file, then rename): a crash never leaves half of one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"final": final, "history": history}, indent=1, default=str))
    tmp.replace(path)
    return path


def write_run(
    out_dir: str | Path,
    runner: str,
    final: dict[str, Any],
    history: list[dict[str, Any]],
    *,
    title: str = "",
    tensorboard: bool = False,
    logged_live: bool = False,
) -> dict[str, Any]:
    """End of a run: ``curves.png``, TensorBoard scalars and ``metrics.json``; returns ``final``.

    ``final`` must hold ``iterations``, ``elapsed_s`` and ``checkpoint``; ``runner``, ``out_dir``
    and ``curves`` are filled in here. Every row must hold :data:`ROW_KEYS`: a runner that breaks
    the schema fails here, at its first test, not in a reader months later. With
    ``tensorboard``, the held-out ``eval`` goes to ``tb/`` as ``eval/<split>/<key>`` and, unless
    a :class:`MetricsLogger` already ``logged_live``, every row's scalars at its iteration.
    """
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    missing = [k for k in ("iterations", "elapsed_s", "checkpoint") if k not in final]
    bad = [i for i, r in enumerate(history) if any(k not in r for k in ROW_KEYS)]
    if missing or bad:
        raise ValueError(
            f"{runner} run {root}: metrics.json schema broken (final lacks {missing}; "
            f"rows {bad[:5]} lack one of {list(ROW_KEYS)})"
        )
    final = {**final, "runner": runner, "out_dir": str(out_dir)}
    evals = final.get("eval") if isinstance(final.get("eval"), dict) else {}
    first = next(iter(evals.values()), None) if evals else None
    from learner.eval.curves import write_curves

    try:
        curves = write_curves(
            history,
            root / CURVES,
            title or runner,
            first.get("success_rate") if isinstance(first, dict) else None,
        )
    except Exception as e:  # a plot never costs a finished run its metrics
        log.warning("learning curves not written: %s: %s", type(e).__name__, e)
        curves = None
    final["curves"] = str(curves) if curves else None
    if tensorboard:
        _write_tensorboard(root / TENSORBOARD, [] if logged_live else history, final)
    _dump(root / METRICS, final, history)
    return final


def _write_tensorboard(tb: Path, history: list[dict[str, Any]], final: dict[str, Any]) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tb))
    try:
        for row in history:
            step = int(row["iteration"])
            for k, v in _scalars(row).items():
                if k != "iteration":
                    writer.add_scalar(k, v, step)
        step = int(final["iterations"])
        for k, v in _eval_scalars(final.get("eval")).items():
            writer.add_scalar(k, v, step)
    finally:
        writer.flush()
        writer.close()


class MetricsLogger:
    """Live metrics of a loop: history rows, the console bar and TensorBoard scalars."""

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

            self.writer = SummaryWriter(str(self.out_dir / TENSORBOARD))
        self.bar = None
        if progress:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, desc=desc, unit="it", dynamic_ncols=True)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        scalars = _scalars(metrics)
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

    def write_json(self, final: dict[str, Any], name: str = METRICS) -> Path:
        """``{"final", "history"}`` as given; runners end with :func:`write_run` instead."""
        return _dump(self.out_dir / name, final, self.history)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()
