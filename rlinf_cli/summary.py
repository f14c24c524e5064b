"""The one line ``rlinf train`` prints on stdout when a run ends: what it did and where it wrote.

>>> from learner.sections import RunConfig, TrainLoopConfig
>>> cfg = RunConfig(name="reach", train=TrainLoopConfig(out_dir="runs/reach"))
>>> summary_line(cfg, {"iterations": 250, "env_steps": 128000.0, "elapsed_s": 212.4,
...                    "success_rate": 0.97, "checkpoint": "runs/reach/c",
...                    "eval": {"id": {"success_rate": 1.0, "episodes": 100}}})
'reach: 250 iterations, 128,000 env steps in 212 s; train success 0.97; eval id 1.00 (100 ep);
checkpoint runs/reach/c; metrics runs/reach/metrics.json'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from learner.sections import RunConfig


def _evals(metrics: dict[str, Any]) -> list[str]:
    ev = metrics.get("eval")
    if isinstance(ev, dict):
        return [
            f"eval {split} {r['success_rate']:.2f} ({r.get('episodes', '?')} ep)"
            for split, r in ev.items()
            if isinstance(r, dict) and "success_rate" in r
        ]
    if "eval/accuracy" in metrics:
        return [f"eval accuracy {metrics['eval/accuracy']:.2f}"]
    return []


def summary_line(cfg: RunConfig, metrics: dict[str, Any]) -> str:
    """``name: N iterations, S env steps in T s; train success x; eval ...; checkpoint P;
    metrics M``."""
    parts = []
    head = f"{cfg.name or cfg.runner}:"
    if "iterations" in metrics:
        head += f" {int(metrics['iterations'])} iterations"
    if "env_steps" in metrics:
        head += f", {int(metrics['env_steps']):,} env steps"
    if "elapsed_s" in metrics:
        head += f" in {metrics['elapsed_s']:.0f} s"
    parts.append(head)
    if "success_rate" in metrics:
        parts.append(f"train success {metrics['success_rate']:.2f}")
    parts += _evals(metrics)
    if metrics.get("checkpoint"):
        parts.append(f"checkpoint {metrics['checkpoint']}")
    parts.append(f"metrics {cfg.train.out_dir}/metrics.json")
    return "; ".join(parts)
