"""Learning curves on harder sim tasks: success vs wall time and env steps, plus held-out eval.

Tasks (configs in ``configs/``): reach from state (the ``make demo`` config, for reference),
push and lift from state, and reach from pixels (CNN on a 32x32 camera, no task state). Each
trains for ``--budget-s`` seconds of wall time (``train.time_budget_s``) with the config's own
hyperparameters, then evaluates the final policy on held-out seeds (and the config's OOD splits).

The training success rate is over the last 100 finished training episodes (stochastic policy);
the eval success is the deterministic policy on held-out seeds.

    .venv/bin/python benchmarks/sim_learning.py                  # ~4 tasks x budget, default 240 s
    .venv/bin/python benchmarks/sim_learning.py --quick          # 20 s per task, smoke run
    .venv/bin/python benchmarks/sim_learning.py --tasks push --budget-s 600

Writes ``benchmarks/results/sim_learning.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).resolve().parent / "results"

TASKS = {
    "reach_state": "configs/sim_franka_reach_ppo.yaml",
    "push_state": "configs/sim_franka_push_ppo.yaml",
    "lift_state": "configs/sim_franka_lift_ppo.yaml",
    "reach_image": "configs/sim_franka_reach_image_ppo.yaml",
}


def curve(history: list[dict], points: int = 8) -> list[dict]:
    """``points`` evenly spaced samples of (wall s, env steps, training success)."""
    wall, rows = 0.0, []
    for h in history:
        wall += h["iteration_s"]
        rows.append({"wall_s": round(wall, 1), "env_steps": int(h["env_steps"]),
                     "train_success": round(h.get("success_rate", 0.0), 3)})
    if len(rows) <= points:
        return rows
    idx = sorted({round(i * (len(rows) - 1) / (points - 1)) for i in range(points)})
    return [rows[i] for i in idx]


def run_task(cluster, name: str, path: str, budget: float, episodes: int, out: Path) -> dict:
    from rlinf_contracts.config import from_dict, load_config
    from learner.runners import get_runner

    raw = load_config(ROOT / path, [f"train.time_budget_s={budget}", "train.iterations=100000",
                                     f"train.out_dir={out / name}", "train.progress=false",
                                     "train.tensorboard=false", "train.checkpoint_every=0",
                                     f"eval.episodes={episodes}"])
    spec = get_runner(raw["runner"])
    cfg = from_dict(spec.config_cls, raw)
    t0 = time.perf_counter()
    final = spec.run(cfg, cluster)
    total = time.perf_counter() - t0
    history = json.loads((out / name / "metrics.json").read_text())["history"]
    return {"task": name, "config": path, "env": cfg.env.name, "obs_mode": cfg.env.obs_mode,
            "model": cfg.model.name, "iterations": len(history), "env_steps": int(history[-1]["env_steps"]),
            "train_wall_s": round(sum(h["iteration_s"] for h in history), 1), "run_wall_s": round(total, 1),
            "final_train_success": round(history[-1].get("success_rate", 0.0), 3),
            "eval": {k: round(v["success_rate"], 3) for k, v in final.get("eval", {}).items()},
            "curve": curve(history)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument("--eval-episodes", type=int, default=50)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
    from learner.cluster import Cluster

    budget = 20.0 if args.quick else args.budget_s
    cluster = Cluster.local()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tasks.split(","):
            r = run_task(cluster, name, TASKS[name], budget, 10 if args.quick else args.eval_episodes, Path(tmp))
            rows.append(r)
            print(f"{name}: {r['env_steps']} env steps in {r['train_wall_s']} s, train success "
                  f"{r['final_train_success']}, eval {r['eval']}", flush=True)
    cluster.shutdown()
    write(rows, budget, args)
    return 0


def write(rows: list[dict], budget: float, args: argparse.Namespace) -> None:
    meta = {"machine": f"{platform.machine()}, {os.cpu_count()} cores (shared with other jobs)",
            "python": platform.python_version(), "budget_s": budget, "eval_episodes": args.eval_episodes,
            "placement": "one fused process (configs' default)"}
    RESULTS.mkdir(exist_ok=True)
    prev = {}
    if (RESULTS / "sim_learning.json").exists() and not args.quick:
        prev = {r["task"]: r for r in json.loads((RESULTS / "sim_learning.json").read_text()).get("rows", [])}
    prev.update({r["task"]: r for r in rows})
    rows = sorted(prev.values(), key=lambda r: list(TASKS).index(r["task"]) if r["task"] in TASKS else 99)
    (RESULTS / "sim_learning.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = ["# Sim learning: success vs wall time and env steps", "",
             f"PPO, one fused process per run, {meta['machine']}; wall-time budget per task "
             f"{budget:.0f} s (training only; eval after). Training success = last 100 training "
             "episodes (stochastic policy); eval = deterministic policy on held-out seeds.", "",
             "| task | obs | model | env steps | train wall s | train success | held-out eval success |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ev = ", ".join(f"{k}: {v:.2f}" for k, v in r["eval"].items())
        lines.append(f"| {r['task']} | {r['obs_mode']} | {r['model']} | {r['env_steps']} | {r['train_wall_s']} | "
                     f"{r['final_train_success']:.2f} | {ev} |")
    for r in rows:
        lines += ["", f"## {r['task']} curve", "", "| wall s | env steps | train success |", "|---|---|---|"]
        lines += [f"| {c['wall_s']} | {c['env_steps']} | {c['train_success']:.2f} |" for c in r["curve"]]
    (RESULTS / "sim_learning.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:8 + len(rows)]))


if __name__ == "__main__":
    raise SystemExit(main())
