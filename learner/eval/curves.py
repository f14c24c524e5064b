"""Learning curves of any run: the one plotter behind every runner's ``curves.png``.

``write_curves(history, path)`` draws, from the rows of ``metrics.json``, one row of panels per
quantity the run has (:data:`ROWS`, in that order: success rate, return, LLM accuracy and
reward, tool use, classifier accuracy, losses) against two x axes: the run's progress (env steps
when it steps an env, else gradient updates, else the row's iteration) and wall-clock seconds.
The final held-out success rate is marked on the success panel. ``learner.metrics.write_run``
calls it at the end of every ``rlinf train``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROWS = (
    ("success_rate", "success rate (last 100 episodes)"),
    ("episode_return", "episode return"),
    ("eval/accuracy", "held-out accuracy"),
    ("rollout/reward", "train sample reward"),
    ("rollout/tool_rate", "episodes with a tool call"),
    ("val/balanced_accuracy", "val balanced accuracy"),
    ("train/loss", "train loss"),
    ("train/sft_loss", "SFT loss"),
    ("train/bc_loss", "BC loss"),
    ("train/actor_loss", "actor loss"),
)
MAX_ROWS = 3
PROGRESS = (("env_steps", "env steps"), ("updates", "updates"), ("iteration", "iteration"))
WALL = ("time/wall_s", "wall-clock s")


def panels(history: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(y rows, x columns) that ``history`` can fill.

    >>> panels([{"iteration": 0, "time/wall_s": 1.0, "updates": 5, "train/bc_loss": 0.3}])
    ([('train/bc_loss', 'BC loss')], [('updates', 'updates'), ('time/wall_s', 'wall-clock s')])
    """
    rows = [(k, label) for k, label in ROWS if any(k in r for r in history)][:MAX_ROWS]
    x = next((c for c in PROGRESS if any(c[0] in r for r in history)), PROGRESS[-1])
    return rows, [x, WALL]


def write_curves(
    history: list[dict[str, Any]],
    path: str | Path,
    title: str = "",
    eval_success: float | None = None,
) -> Path | None:
    """PNG of the curves; None when the history has no point to draw."""
    rows, columns = panels(history)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 2, figsize=(10, 3.25 * len(rows)), squeeze=False)
    for r, (key, label) in enumerate(rows):
        for c, (xkey, xlabel) in enumerate(columns):
            ax = axes[r][c]
            pts = [(row[xkey], row[key]) for row in history if key in row and xkey in row]
            if pts:
                ax.plot(*zip(*pts), lw=1.5, marker="." if len(pts) < 30 else None)
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
