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

from bench_results import RESULTS, machine_meta, provenance

MODES: list[tuple[str, dict, bool]] = [  # (label, placement, fuse_collocated)
    ("fused x1", {"env,rollout,actor": "0"}, True),
    ("fused x2", {"env,rollout,actor": "0-1"}, True),
    ("collocated", {"env,rollout,actor": "0-1"}, False),
    ("disaggregated", {"env": "0", "rollout": "1", "actor": "2-3"}, True),
    ("hybrid", {"env": "0", "rollout": "1", "actor": "0-1"}, True),
]


# name -> (description, config sections). "demo" is the `make demo` workload (env-bound: MuJoCo
# stepping costs ~6x the MLP inference); "balanced" makes env and inference cost about the same
# per micro-batch (toy env with 0.5 ms of simulated physics per env step, a 2048-wide MLP), the
# regime where RLinf's pipelining pays off.
WORKLOADS: dict[str, tuple[str, dict]] = {
    "demo": (
        "PPO on mujoco_franka/reach (state), 32 envs x 16 steps per iteration, MLP 64x64, "
        "5 epochs x 4 minibatches",
        {
            "env": {"name": "mujoco_franka/reach", "num_envs": 32, "obs_mode": "state"},
            "model": {"name": "mlp", "hidden": [64, 64]},
            "actor": {"lr": 1e-3, "epochs": 5, "minibatches": 4},
        },
    ),
    "balanced": (
        "PPO on toy/point_reach with 0.5 ms simulated physics per env step, 32 envs x 16 steps, "
        "MLP 2048x2048, 1 epoch x 2 minibatches",
        {
            "env": {"name": "toy/point_reach", "num_envs": 32, "kwargs": {"step_cost_us": 500.0}},
            "model": {"name": "mlp", "hidden": [2048, 2048]},
            "actor": {"lr": 3e-4, "epochs": 1, "minibatches": 2},
        },
    ),
}


def workload(name: str) -> dict:
    raw = json.loads(json.dumps(WORKLOADS[name][1]))
    raw.update(
        algorithm={"gamma": 0.95}, rollout={"steps_per_iteration": 16, "channel_timeout": 300.0}
    )
    return raw


def run_mode(
    cluster,
    label: str,
    placement: dict,
    fuse: bool,
    stages: int,
    work: str,
    iters: int,
    warmup: int,
    out: Path,
) -> dict:
    from learner.runners import get_runner
    from learner.runners.config import EmbodiedConfig
    from rlinf_contracts.config import from_dict

    raw = workload(work)
    raw["name"] = f"bench-{label.replace(' ', '')}-s{stages}"
    raw["placement"] = placement
    raw["rollout"].update(pipeline_stages=stages, fuse_collocated=fuse)
    raw["train"] = {
        "iterations": warmup + iters,
        "out_dir": str(out / raw["name"]),
        "progress": False,
        "tensorboard": False,
        "final_eval": False,
    }
    cfg = from_dict(EmbodiedConfig, raw)
    t0 = time.perf_counter()
    final = get_runner("embodied").run(cfg, cluster)
    wall = time.perf_counter() - t0
    hist = json.loads((Path(cfg.train.out_dir) / "metrics.json").read_text())["history"][warmup:]
    return {
        "mode": label,
        "placement_mode": final["placement_mode"],
        "topology": final["topology"],
        "placement": placement,
        "pipeline_stages": stages,
        "run_wall_s": wall,
        "iteration_s_all": [h["iteration_s"] for h in hist],
        "timings_all": [{k[5:]: v for k, v in h.items() if k.startswith("time/")} for h in hist],
    }


def merge(runs: list[dict]) -> dict:
    """Medians over every measured iteration of every repeat of one (mode, stages)."""
    its = [t for r in runs for t in r["iteration_s_all"]]
    timings = [t for r in runs for t in r["timings_all"]]
    it_s = statistics.median(its)
    row = {
        k: runs[0][k]
        for k in ("mode", "placement_mode", "topology", "placement", "pipeline_stages")
    }
    row.update(
        iteration_s=it_s,
        iteration_s_min=min(its),
        iteration_s_max=max(its),
        samples=len(its),
        env_steps_per_s=32 * 16 / it_s,
        timings_s={k: statistics.median(t[k] for t in timings) for k in timings[0]},
    )
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--workload", default="demo", choices=list(WORKLOADS))
    ap.add_argument("--modes", default=None, help="comma-separated subset of mode labels")
    ap.add_argument(
        "--repeats", type=int, default=2, help="passes over all modes, alternating order"
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--render",
        "--from-json",
        action="store_true",
        help="only rewrite placement.md from placement.json",
    )
    args = ap.parse_args()
    if args.render:
        data = json.loads((RESULTS / "placement.json").read_text())
        lines = ["# Placement modes", ""] + [
            ln for n, w in data["workloads"].items() for ln in section(n, w)
        ]
        (RESULTS / "placement.md").write_text("\n".join(lines) + "\n")
        return 0
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    from learner.cluster import Cluster

    modes = MODES[:1] + MODES[3:4] if args.quick else MODES
    if args.modes:
        modes = [m for m in MODES if m[0] in args.modes.split(",")]
    iters = 2 if args.quick else args.iterations
    combos = [
        (label, placement, fuse, stages) for label, placement, fuse in modes for stages in (1, 2)
    ]
    cluster = Cluster.local(num_cpus=args.slots)
    runs: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(1 if args.quick else args.repeats):
            # alternate the order so slow drifts of the machine's load hit every mode alike
            for label, placement, fuse, stages in combos if rep % 2 == 0 else combos[::-1]:
                r = run_mode(
                    cluster,
                    label,
                    placement,
                    fuse,
                    stages,
                    args.workload,
                    iters,
                    args.warmup,
                    Path(tmp) / f"rep{rep}",
                )
                runs.setdefault((label, stages), []).append(r)
                print(
                    f"rep {rep} {label:14s} stages={stages} {r['placement_mode']:13s} "
                    f"it={statistics.median(r['iteration_s_all']):.3f}s",
                    flush=True,
                )
    rows = [merge(runs[(label, stages)]) for label, _, _, stages in combos]
    cluster.shutdown()
    report(rows, args)
    return 0


def report(rows: list[dict], args: argparse.Namespace) -> None:
    base = next(
        (r for r in rows if r["mode"] == "collocated" and r["pipeline_stages"] == 1),
        next(
            (r for r in rows if r["topology"] == "channels" and r["pipeline_stages"] == 1), rows[0]
        ),
    )
    best = max(rows, key=lambda r: r["env_steps_per_s"])
    best_channel = max(
        (r for r in rows if r["topology"] == "channels"), key=lambda r: r["env_steps_per_s"]
    )
    summary = {
        "baseline": f"{base['mode']} stages={base['pipeline_stages']}",
        "best": f"{best['mode']} stages={best['pipeline_stages']}",
        "speedup_best_over_collocated": best["env_steps_per_s"] / base["env_steps_per_s"],
        "best_channel_mode": f"{best_channel['mode']} stages={best_channel['pipeline_stages']}",
        "speedup_best_channel_over_collocated": best_channel["env_steps_per_s"]
        / base["env_steps_per_s"],
    }
    meta = machine_meta(
        python=platform.python_version(),
        slots=args.slots,
        workload=WORKLOADS[args.workload][0],
        iterations_measured=2 if args.quick else args.iterations,
        warmup=args.warmup,
        repeats=1 if args.quick else args.repeats,
    )
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "placement.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data = data if "workloads" in data else {"workloads": {}}
    data["workloads"][args.workload] = {"meta": meta, "summary": summary, "rows": rows}
    path.write_text(json.dumps(data, indent=1))
    lines = ["# Placement modes", ""]
    for name, w in data["workloads"].items():
        lines += section(name, w)
    (RESULTS / "placement.md").write_text("\n".join(lines) + "\n")
    print("\n".join(section(args.workload, data["workloads"][args.workload])))


def section(name: str, w: dict) -> list[str]:
    meta, summary, rows = w["meta"], w["summary"], w["rows"]
    lines = [f"## Workload `{name}`", ""]
    for line in provenance(meta):
        lines += [line, ""]
    lines += [
        f"{meta['workload']}; {meta['slots']} logical slots on a machine shared with other jobs; "
        f"median over {meta['repeats']} passes (alternating order) x "
        f"{meta['iterations_measured']} iterations "
        f"after {meta['warmup']} warm-up each.",
        "",
        "| mode | placement | mode (parsed) | stages | iteration s (min-max) | env steps/s | env "
        "busy s | infer busy s | train s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t = r["timings_s"]
        env_busy = t.get("env_busy_s", t.get("rollout_s", float("nan")))
        lines.append(
            f"| {r['mode']} | `{json.dumps(r['placement'])}` | {r['placement_mode']} "
            f"({r['topology']}) | "
            f"{r['pipeline_stages']} | {r['iteration_s']:.3f} "
            f"({r['iteration_s_min']:.3f}-{r['iteration_s_max']:.3f}) | "
            f"{r['env_steps_per_s']:.0f} | "
            f"{env_busy:.3f} | {t.get('infer_busy_s', float('nan')):.3f} | "
            f"{t.get('train_s', float('nan')):.3f} |"
        )
    lines += explain(rows)
    lines += [
        "",
        f"Best: **{summary['best']}**, {summary['speedup_best_over_collocated']:.2f}x the env "
        "steps/s "
        f"of {summary['baseline']}. Best channel-connected mode: {summary['best_channel_mode']}, "
        f"{summary['speedup_best_channel_over_collocated']:.2f}x.",
        "",
        "For `fused` rows the env-busy column is the whole in-process rollout (env + inference).",
        "",
    ]
    return lines


def explain(rows: list[dict]) -> list[str]:
    """What pipelining could give at most, from the measured busy times, next to what it gave."""
    out = ["", "Why these numbers:", ""]
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
            f"- **{label}**: per iteration env stepping {env:.3f} s, inference {inf:.3f} s, "
            f"training {train:.3f} s; "
            f"the rollout phase took {rollout_1:.3f} s with 1 stage, so {max(overhead, 0):.3f} s "
            f"({max(overhead, 0) / max(rollout_1, 1e-9):.0%}) is channel round trips and waiting. "
            "Perfect overlap of env and inference could cut the rollout phase by at most "
            f"{ideal:.2f}x, "
            f"i.e. the whole iteration (training is not pipelined) by at most "
            f"{r1['iteration_s'] / (env + inf - min(env, inf) + max(overhead, 0) + train):.2f}x; "
            f"2 stages measured {r1['iteration_s'] / r2['iteration_s']:.2f}x, and inference on "
            "half batches cost "
            f"{r2['timings_s']['infer_busy_s'] / max(inf, 1e-9):.2f}x the full-batch inference "
            "time."
        )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
