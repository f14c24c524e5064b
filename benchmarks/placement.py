"""Placement modes on one training workload: env steps/s and iteration time per mode.

Workload (same for every mode, one run of this script): PPO on ``mujoco_franka/reach`` (state),
32 envs x 16 steps per iteration, MLP 64x64 -- the ``make demo`` workload. Each mode runs
``warmup + iterations`` iterations; the first ``warmup`` are dropped (process start, first
weight sync). Modes:

* ``fused``: collocated placement, env + rollout + actor in one process per slot
  (``rollout.fuse_collocated``), 1 process or 2 data-parallel processes;
* ``collocated``: env, rollout and actor as separate groups on the same slots, channels between;
* ``disaggregated``: env, rollout, actor on disjoint slots;
* ``hybrid``: env and rollout on their own slots, actor over all of them;

each with ``rollout.pipeline_stages`` 1 and 2. The cluster has ``--slots`` logical slots
(default 4) mapped onto the machine's cores as ``slot % cores`` by the worker pinning, so on a
2-core machine disjoint *slots* are only disjoint *cores* for env vs rollout; the report says so.

    .venv/bin/python benchmarks/placement.py            # ~15 min on 2 busy cores (2 passes)
    .venv/bin/python benchmarks/placement.py --quick    # 2 modes, smoke run

Writes ``benchmarks/results/placement.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESULTS = Path(__file__).resolve().parent / "results"

MODES: list[tuple[str, dict, bool]] = [  # (label, placement, fuse_collocated)
    ("fused x1", {"env,rollout,actor": "0"}, True),
    ("fused x2", {"env,rollout,actor": "0-1"}, True),
    ("collocated", {"env,rollout,actor": "0-1"}, False),
    ("disaggregated", {"env": "0", "rollout": "1", "actor": "2-3"}, True),
    ("hybrid", {"env": "0", "rollout": "1", "actor": "0-1"}, True),
]


def workload(env: str) -> dict:
    return {"env": {"name": env, "num_envs": 32, "obs_mode": "state"},
            "model": {"name": "mlp", "hidden": [64, 64]},
            "algorithm": {"gamma": 0.95}, "actor": {"lr": 1e-3, "epochs": 5, "minibatches": 4},
            "rollout": {"steps_per_iteration": 16, "channel_timeout": 300.0}}


def run_mode(cluster, label: str, placement: dict, fuse: bool, stages: int, env: str, iters: int,
             warmup: int, out: Path) -> dict:
    from learner.config import from_dict
    from learner.runners import get_runner
    from learner.runners.config import EmbodiedConfig

    raw = workload(env)
    raw["name"] = f"bench-{label.replace(' ', '')}-s{stages}"
    raw["placement"] = placement
    raw["rollout"].update(pipeline_stages=stages, fuse_collocated=fuse)
    raw["train"] = {"iterations": warmup + iters, "out_dir": str(out / raw["name"]), "progress": False,
                    "tensorboard": False, "final_eval": False}
    cfg = from_dict(EmbodiedConfig, raw)
    t0 = time.perf_counter()
    final = get_runner("embodied").run(cfg, cluster)
    wall = time.perf_counter() - t0
    hist = json.loads((Path(cfg.train.out_dir) / "metrics.json").read_text())["history"][warmup:]
    return {"mode": label, "placement_mode": final["placement_mode"], "topology": final["topology"],
            "placement": placement, "pipeline_stages": stages, "run_wall_s": wall,
            "iteration_s_all": [h["iteration_s"] for h in hist],
            "timings_all": [{k[5:]: v for k, v in h.items() if k.startswith("time/")} for h in hist]}


def merge(runs: list[dict]) -> dict:
    """Medians over every measured iteration of every repeat of one (mode, stages)."""
    its = [t for r in runs for t in r["iteration_s_all"]]
    timings = [t for r in runs for t in r["timings_all"]]
    it_s = statistics.median(its)
    row = {k: runs[0][k] for k in ("mode", "placement_mode", "topology", "placement", "pipeline_stages")}
    row.update(iteration_s=it_s, iteration_s_min=min(its), iteration_s_max=max(its), samples=len(its),
               env_steps_per_s=32 * 16 / it_s,
               timings_s={k: statistics.median(t[k] for t in timings) for k in timings[0]})
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--env", default="mujoco_franka/reach")
    ap.add_argument("--repeats", type=int, default=2, help="passes over all modes, alternating order")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    from learner.cluster import Cluster

    modes = MODES[:1] + MODES[3:4] if args.quick else MODES
    iters = 2 if args.quick else args.iterations
    combos = [(label, placement, fuse, stages) for label, placement, fuse in modes for stages in (1, 2)]
    cluster = Cluster.local(num_cpus=args.slots)
    runs: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(1 if args.quick else args.repeats):
            # alternate the order so slow drifts of the machine's load hit every mode alike
            for label, placement, fuse, stages in (combos if rep % 2 == 0 else combos[::-1]):
                r = run_mode(cluster, label, placement, fuse, stages, args.env, iters, args.warmup,
                             Path(tmp) / f"rep{rep}")
                runs.setdefault((label, stages), []).append(r)
                print(f"rep {rep} {label:14s} stages={stages} {r['placement_mode']:13s} "
                      f"it={statistics.median(r['iteration_s_all']):.3f}s", flush=True)
    rows = [merge(runs[(label, stages)]) for label, _, _, stages in combos]
    cluster.shutdown()
    report(rows, args)
    return 0


def report(rows: list[dict], args: argparse.Namespace) -> None:
    base = next(r for r in rows if r["mode"] == "collocated" and r["pipeline_stages"] == 1) \
        if any(r["mode"] == "collocated" for r in rows) else rows[0]
    best = max(rows, key=lambda r: r["env_steps_per_s"])
    best_channel = max((r for r in rows if r["topology"] == "channels"), key=lambda r: r["env_steps_per_s"])
    summary = {"baseline": f"{base['mode']} stages={base['pipeline_stages']}",
               "best": f"{best['mode']} stages={best['pipeline_stages']}",
               "speedup_best_over_collocated": best["env_steps_per_s"] / base["env_steps_per_s"],
               "best_channel_mode": f"{best_channel['mode']} stages={best_channel['pipeline_stages']}",
               "speedup_best_channel_over_collocated": best_channel["env_steps_per_s"] / base["env_steps_per_s"]}
    meta = {"machine": f"{platform.machine()}, {os.cpu_count()} cores (shared with other jobs)",
            "python": platform.python_version(), "slots": args.slots, "env": args.env,
            "iterations_measured": 2 if args.quick else args.iterations, "warmup": args.warmup,
            "repeats": 1 if args.quick else args.repeats,
            "workload": "PPO, 32 envs x 16 steps per iteration, MLP 64x64, 5 epochs x 4 minibatches"}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "placement.json").write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
    lines = ["# Placement modes on one workload", "", f"{meta['workload']}; env `{args.env}`; "
             f"{args.slots} logical slots on {meta['machine']}; median over {meta['repeats']} passes (alternating "
             f"order) x {meta['iterations_measured']} iterations after {args.warmup} warm-up each.", "",
             "| mode | placement | mode (parsed) | stages | iteration s (min-max) | env steps/s | env busy s | infer busy s | train s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["timings_s"]
        env_busy = t.get("env_busy_s", t.get("rollout_s", float("nan")))
        lines.append(f"| {r['mode']} | `{json.dumps(r['placement'])}` | {r['placement_mode']} ({r['topology']}) | "
                     f"{r['pipeline_stages']} | {r['iteration_s']:.3f} ({r['iteration_s_min']:.3f}-{r['iteration_s_max']:.3f}) | "
                     f"{r['env_steps_per_s']:.0f} | "
                     f"{env_busy:.3f} | {t.get('infer_busy_s', float('nan')):.3f} | {t.get('train_s', float('nan')):.3f} |")
    lines += explain(rows)
    lines += ["", f"Best: **{summary['best']}**, {summary['speedup_best_over_collocated']:.2f}x the env steps/s "
              f"of {summary['baseline']} (channels). Best channel-connected mode: {summary['best_channel_mode']}, "
              f"{summary['speedup_best_channel_over_collocated']:.2f}x.",
              "", "For `fused` rows the env-busy column is the whole in-process rollout (env + inference)."]
    (RESULTS / "placement.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def explain(rows: list[dict]) -> list[str]:
    """What pipelining could give at most, from the measured busy times, next to what it gave."""
    out = ["", "## Why these numbers", ""]
    for label in ("disaggregated", "hybrid", "collocated"):
        r1 = next((r for r in rows if r["mode"] == label and r["pipeline_stages"] == 1), None)
        r2 = next((r for r in rows if r["mode"] == label and r["pipeline_stages"] == 2), None)
        if not r1 or not r2 or "env_busy_s" not in r1["timings_s"]:
            continue
        env, inf, train = (r1["timings_s"][k] for k in ("env_busy_s", "infer_busy_s", "train_s"))
        rollout_1 = r1["iteration_s"] - train
        ideal = (env + inf) / max(env, inf)
        overhead = rollout_1 - env - inf
        out.append(
            f"- **{label}**: per iteration env stepping {env:.3f} s, inference {inf:.3f} s, training {train:.3f} s; "
            f"the rollout phase took {rollout_1:.3f} s with 1 stage, so {max(overhead, 0):.3f} s "
            f"({max(overhead, 0) / max(rollout_1, 1e-9):.0%}) is channel round trips and waiting. "
            f"Perfect overlap of env and inference could cut the rollout phase by at most {ideal:.2f}x; "
            f"2 stages measured {r1['iteration_s'] / r2['iteration_s']:.2f}x on the whole iteration.")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
