"""Learning curves of an embodied run: success rate and return against env steps and wall time.

``write_curves(history, path)`` draws a 2 x 2 grid (rows: success rate, episode return; columns:
env steps, wall-clock seconds) from the rows of ``metrics.json`` and marks the final held-out
eval; it writes ``<out_dir>/curves.png`` at the end of every ``rlinf train``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROWS = (("success_rate", "success rate (last 100 episodes)"), ("episode_return", "episode return"))
COLUMNS = (("env_steps", "env steps"), ("time/wall_s", "wall-clock s"))


def write_curves(
    history: list[dict[str, float]],
    path: str | Path,
    title: str = "",
    eval_success: float | None = None,
) -> Path | None:
    """PNG of the curves; None when the history has no point to draw."""
    if not any(k in row for row in history for k, _ in ROWS):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 6.5), squeeze=False)
    for r, (key, label) in enumerate(ROWS):
        for c, (xkey, xlabel) in enumerate(COLUMNS):
            ax = axes[r][c]
            pts = [(row[xkey], row[key]) for row in history if key in row and xkey in row]
            if pts:
                ax.plot(*zip(*pts), lw=1.5)
            if key == "success_rate" and eval_success is not None and pts:
                ax.axhline(
                    eval_success,
                    color="tab:green",
                    ls="--",
                    lw=1,
                    label=f"held-out eval {eval_success:.2f}",
                )
                ax.legend(loc="lower right", fontsize=8)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def prior_history(metrics_json: str | Path, before_iteration: int) -> list[dict[str, Any]]:
    """Rows of an earlier ``metrics.json`` below ``before_iteration``: what a resumed run appends to."""
    import json

    p = Path(metrics_json)
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
