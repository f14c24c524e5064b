"""The across-seed report of one config: ``seeds.json``, ``seeds.md`` and ``seeds.png``.

``rlinf train CONFIG --seeds N`` trains each seed into ``<out_dir>/seed_<k>/`` (the ordinary run
directory, :mod:`learner.metrics`) and then calls :func:`write_report`, which reads every seed's
``metrics.json`` and writes, next to the seed directories::

    seeds.json   per metric: IQM, 95 % stratified bootstrap interval, each seed's value
    seeds.md     the same as a table (:func:`seeds_table`; benchmarks render theirs with it)
    seeds.png    each seed's learning curve and the IQM curve with its band, vs progress and wall s

The metrics are the final held-out figure(s) (``eval/<split>/success_rate``, or the flat held-out
metrics of runners without splits) and the final training success rate (:func:`final_figures`).
Why read the run directories rather than the runners' return values: a seed is a separate
process, and the files are what people and benchmarks re-read later anyway.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from learner.eval.aggregate import DEFAULT_REPS, Estimate, estimate, iqm_band
from learner.metrics import METRICS

log = logging.getLogger(__name__)

REPORT_JSON, REPORT_MD, REPORT_PNG = "seeds.json", "seeds.md", "seeds.png"
CONFIDENCE = 0.95
CURVE_POINTS = 50
CURVE_REPS = 10_000
"""Bootstrap draws per curve band: the band is drawn, not quoted, so fewer than the table's."""
TRAIN_SUCCESS = "success_rate"
FLAT_HELD_OUT = {"eval/accuracy": "eval/accuracy", "final_accuracy": "eval/accuracy"}
"""Held-out figures some runners keep at the top of ``final`` (LLM reasoning) -> report name."""


def seed_dir(out_dir: str | Path, seed: int) -> Path:
    """``<out_dir>/seed_<seed>``: where one seed of a multi-seed run writes its run directory.

    >>> seed_dir("runs/reach", 3).as_posix()
    'runs/reach/seed_3'
    """
    return Path(out_dir) / f"seed_{seed}"


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)


def final_figures(final: dict[str, Any]) -> dict[str, float]:
    """Held-out figure(s) first, then the training success rate, of one run's ``final``.

    >>> final_figures({"success_rate": 0.75, "eval": {"id": {"success_rate": 1.0, "episodes": 4},
    ...                                            "ood": {"success_rate": 0.5}}})
    {'eval/id/success_rate': 1.0, 'eval/ood/success_rate': 0.5, 'success_rate': 0.75}
    >>> final_figures({"eval": {"mse": 0.25}, "final_accuracy": 0.5})
    {'eval/mse': 0.25, 'eval/accuracy': 0.5}
    """
    out: dict[str, float] = {}
    evals = final.get("eval")
    if isinstance(evals, dict):
        for split, res in evals.items():
            if isinstance(res, dict) and _number(res.get("success_rate")):
                out[f"eval/{split}/success_rate"] = float(res["success_rate"])
            elif _number(res):
                out[f"eval/{split}"] = float(res)
    for key, name in FLAT_HELD_OUT.items():
        if name not in out and _number(final.get(key)):
            out[name] = float(final[key])
    if _number(final.get(TRAIN_SUCCESS)):
        out[TRAIN_SUCCESS] = float(final[TRAIN_SUCCESS])
    return out


@dataclass(frozen=True)
class SeedRun:
    """One finished seed: its run directory's ``final`` and ``history``."""

    seed: int
    out_dir: Path
    final: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, seed: int, out_dir: str | Path) -> SeedRun:
        data = json.loads((Path(out_dir) / METRICS).read_text())
        return cls(seed, Path(out_dir), data.get("final", {}), data.get("history", []))

    def figures(self) -> dict[str, float]:
        return final_figures(self.final)


@dataclass(frozen=True)
class SeedFailure:
    """A seed whose training exited non-zero (or left no ``metrics.json``)."""

    seed: int
    exit_code: int
    log: str


def aggregate(
    runs: list[SeedRun],
    failures: Sequence[SeedFailure] = (),
    *,
    config: str = "",
    reps: int = DEFAULT_REPS,
    size: float = CONFIDENCE,
) -> dict[str, Any]:
    """``seeds.json``'s content: per metric the IQM, interval and each finished seed's value.

    A metric is aggregated over the seeds that report it (``seeds`` lists them, ``values`` is in
    the same order); the bootstrap draws are seeded, so the same runs give the same report.
    """
    figures = {r.seed: r.figures() for r in runs}
    names = list(dict.fromkeys(k for f in figures.values() for k in f))
    metrics = {}
    for name in names:
        seeds = [s for s, f in figures.items() if name in f]
        est: Estimate = estimate([figures[s][name] for s in seeds], size=size, reps=reps)
        metrics[name] = {
            "iqm": est.iqm,
            "ci": [est.low, est.high],
            "seeds": seeds,
            "values": list(est.values),
        }
    return {
        "config": config,
        "seeds": [r.seed for r in runs] + [f.seed for f in failures],
        "finished": [r.seed for r in runs],
        "failed": [{"seed": f.seed, "exit_code": f.exit_code, "log": f.log} for f in failures],
        "interval": {
            "size": size,
            "method": "stratified percentile bootstrap over seeds (rliable's definition)",
            "reps": reps,
        },
        "metrics": metrics,
    }


def seeds_table(report: dict[str, Any], digits: int = 2) -> list[str]:
    """Markdown rows of a ``seeds.json``: one row per metric, IQM [interval], each seed's value.

    >>> print("\\n".join(seeds_table({"metrics": {"success_rate": {
    ...     "iqm": 0.5, "ci": [0.25, 0.75], "seeds": [0, 1], "values": [0.25, 0.75]}}})))
    | metric | IQM [95% CI] | n | seed 0 | seed 1 |
    |---|---|---|---|---|
    | success_rate | 0.50 [0.25, 0.75] | 2 | 0.25 | 0.75 |
    """
    metrics = report.get("metrics", {})
    seeds = list(dict.fromkeys(s for m in metrics.values() for s in m["seeds"]))
    pct = round(100 * report.get("interval", {}).get("size", CONFIDENCE))
    lines = [
        "| metric | IQM [" + f"{pct}% CI] | n | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "|---" * (3 + len(seeds)) + "|",
    ]
    for name, m in metrics.items():
        by_seed = dict(zip(m["seeds"], m["values"], strict=True))
        cells = [f"{by_seed[s]:.{digits}f}" if s in by_seed else "-" for s in seeds]
        est = Estimate(m["iqm"], m["ci"][0], m["ci"][1], tuple(m["values"]))
        lines.append(
            f"| {name} | {est.text(digits)} | {len(m['values'])} | " + " | ".join(cells) + " |"
        )
    return lines


def report_markdown(report: dict[str, Any]) -> str:
    """``seeds.md``: the config, the table, failed seeds with their logs."""
    finished, failed = report.get("finished", []), report.get("failed", [])
    lines = [
        f"# Seeds of `{report.get('config', '')}`",
        "",
        f"{len(finished)} of {len(finished) + len(failed)} seeds finished "
        f"({', '.join(map(str, finished)) or 'none'}). IQM = mean of the middle half of the "
        "seeds; the interval is a stratified percentile bootstrap "
        f"({report.get('interval', {}).get('reps', DEFAULT_REPS):,} draws).",
        "",
        *seeds_table(report),
    ]
    if failed:
        lines += ["", "Failed seeds:", ""]
        lines += [f"- seed {f['seed']}: exit {f['exit_code']}, log `{f['log']}`" for f in failed]
    return "\n".join(lines) + "\n"


def curve_panels(runs: list[SeedRun]) -> tuple[tuple[str, str] | None, list[tuple[str, str]]]:
    """(y quantity, x columns) of the seeds' curves: the first learning-curve row they all have
    (success rate for an env runner), vs progress (env steps ...) and wall-clock seconds."""
    from learner.eval.curves import panels

    rows, columns = panels([row for r in runs for row in r.history])
    return (rows[0] if rows else None), columns


def _points(history: list[dict[str, Any]], x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    pts = sorted(
        (float(r[x]), float(r[y])) for r in history if _number(r.get(x)) and _number(r.get(y))
    )
    if not pts:
        return np.empty(0), np.empty(0)
    xs, ys = zip(*pts, strict=True)
    return np.asarray(xs), np.asarray(ys)


def common_grid(curves: list[tuple[np.ndarray, np.ndarray]], points: int) -> np.ndarray:
    """x values every curve covers (empty when they share no range): the IQM curve is drawn
    only where each seed has data, so its ends are not a subset of the seeds.

    >>> common_grid([(np.array([0.0, 4.0]), None), (np.array([1.0, 9.0]), None)], 4).tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    lo = max(float(xs[0]) for xs, _ in curves)
    hi = min(float(xs[-1]) for xs, _ in curves)
    return np.linspace(lo, hi, points) if hi > lo else np.empty(0)


def write_seed_curves(runs: list[SeedRun], path: str | Path, title: str = "") -> Path | None:
    """``seeds.png``: each seed's curve (thin) and the IQM curve with its band; None when the
    seeds have no curve to draw."""
    quantity, columns = curve_panels(runs)
    if quantity is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ykey, ylabel = quantity
    fig, axes = plt.subplots(1, len(columns), figsize=(5 * len(columns), 3.6), squeeze=False)
    for ax, (xkey, xlabel) in zip(axes[0], columns, strict=True):
        curves = [(r.seed, *_points(r.history, xkey, ykey)) for r in runs]
        curves = [(s, xs, ys) for s, xs, ys in curves if xs.size]
        for seed, xs, ys in curves:
            ax.plot(xs, ys, lw=0.8, alpha=0.6, label=f"seed {seed}")
        grid = common_grid([(xs, ys) for _, xs, ys in curves], CURVE_POINTS) if curves else None
        if grid is not None and grid.size:
            matrix = np.stack([np.interp(grid, xs, ys) for _, xs, ys in curves])
            mid, low, high = iqm_band(matrix, CONFIDENCE, CURVE_REPS)
            ax.plot(grid, mid, color="black", lw=2, label=f"IQM ({len(curves)} seeds)")
            ax.fill_between(grid, low, high, color="black", alpha=0.15, label="95% CI")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def write_report(
    out_dir: str | Path,
    runs: list[SeedRun],
    failures: Sequence[SeedFailure] = (),
    *,
    config: str = "",
    reps: int = DEFAULT_REPS,
) -> dict[str, Any]:
    """Write ``seeds.json``, ``seeds.md`` and ``seeds.png`` under ``out_dir``; return the report
    (with ``files``: the paths written; ``seeds.png`` is absent when no seed has a curve)."""
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    report = aggregate(runs, failures, config=config, reps=reps)
    png = None
    if runs:
        try:
            png = write_seed_curves(runs, root / REPORT_PNG, f"{config} ({len(runs)} seeds)")
        except Exception as e:  # a plot never costs finished seeds their table
            log.warning("seed curves not written: %s: %s", type(e).__name__, e)
    report["files"] = {
        "json": str(root / REPORT_JSON),
        "md": str(root / REPORT_MD),
        "png": str(png) if png else None,
    }
    (root / REPORT_JSON).write_text(json.dumps(report, indent=1))
    (root / REPORT_MD).write_text(report_markdown(report))
    return report
