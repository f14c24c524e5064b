"""Cost-model prediction error: predicted vs measured iteration time of every candidate.

For each workload: profile (cached), rank every candidate placement / depth with the cost
model, then run each candidate on the real runner (``learner.scheduling.plan.measure``). The
machine is shared, so each prediction is scaled by the reference kernel timed right before
and after that candidate's run, relative to profiling time (``curves.reference_s``); the raw
(unscaled) prediction is kept beside it. ``auto`` = the candidate with the best scaled
prediction; it is compared with the measured best.

    .venv/bin/python benchmarks/schedule.py                    # embodied + grpo, ~10-20 min
    .venv/bin/python benchmarks/schedule.py --workloads grpo

Writes ``benchmarks/results/schedule.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
RESULTS = Path(__file__).resolve().parent / "results"
WORKLOADS = {  # name -> (config, overrides, description)
    "embodied": ("configs/sim_franka_reach_ppo.yaml", [], "PPO on mujoco_franka/reach, 32 envs x 16 steps, MLP 64x64"),
    "grpo": ("configs/llm_grpo_arith.yaml", [], "GRPO on 2-digit addition, tiny Llama, 64 prompts x 8 samples"),
}


def run_workload(name: str, slots: int, iterations: int) -> dict:
    from learner.cluster import Cluster
    from learner.scheduling.curves import reference_s
    from learner.scheduling.plan import measure, rank
    from rlinf_cli.schedule import _config

    path, overrides, desc = WORKLOADS[name]
    cfg = _config(path, overrides)
    preds = rank(cfg, slots, load_factor=False)
    from learner.scheduling.plan import _profile_ref

    ref_prof = _profile_ref(cfg)
    cluster = Cluster.local(num_cpus=slots)
    rows = []
    try:
        for p in preds:
            r0 = reference_s()
            t0 = time.perf_counter()
            measured = measure(cfg, p.candidate, cluster, iterations=iterations)
            factor = (r0 + reference_s()) / 2 / ref_prof if ref_prof > 0 else 1.0
            rows.append({"candidate": p.candidate.label, "placement": p.candidate.placement, "mode": p.mode,
                         "raw_predicted_s": p.iteration_s, "load_factor": factor,
                         "predicted_s": p.iteration_s * factor, "measured_s": measured,
                         "error": (p.iteration_s * factor - measured) / measured,
                         "breakdown": p.breakdown, "wall_s": time.perf_counter() - t0})
            print(f"{name} {p.candidate.label:20s} pred {p.iteration_s * factor:.3f} (raw {p.iteration_s:.3f} x "
                  f"{factor:.2f}) meas {measured:.3f} err {rows[-1]['error']:+.0%}", flush=True)
    finally:
        cluster.shutdown()
    auto = min(rows, key=lambda r: r["predicted_s"])
    best = min(rows, key=lambda r: r["measured_s"])
    return {"description": desc, "config": path, "slots": slots, "rows": rows, "auto": auto["candidate"],
            "measured_best": best["candidate"], "auto_vs_best": auto["measured_s"] / best["measured_s"]}


def _leave_one_out(rows: list[dict]) -> list[float]:
    import statistics

    out = []
    for i, r in enumerate(rows):
        others = [o["measured_s"] / o["raw_predicted_s"] for j, o in enumerate(rows) if j != i]
        k = statistics.median(others) if others else 1.0
        out.append((r["raw_predicted_s"] * k - r["measured_s"]) / r["measured_s"])
    return out


def render(data: dict) -> str:
    lines = ["# Cost model: predicted vs measured iteration time", "", data["meta"], ""]
    for name, w in data["workloads"].items():
        errs = [abs(r["error"]) for r in w["rows"]]
        lines += [f"## `{name}`: {w['description']} ({w['config']}, {w['slots']} slots)", "",
                  "| candidate | placement | mode | raw prediction s | load factor | predicted s | measured s | error |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in w["rows"]:
            lines.append(f"| {r['candidate']} | `{json.dumps(r['placement'])}` | {r['mode']} | {r['raw_predicted_s']:.3f} | "
                         f"{r['load_factor']:.2f} | {r['predicted_s']:.3f} | {r['measured_s']:.3f} | {r['error']:+.0%} |")
        loo = _leave_one_out(w["rows"])
        lines += ["", "Leave-one-out calibrated error (each prediction scaled by the median measured/raw ratio "
                  "of the *other* candidates: one machine-load factor, no per-candidate fit): "
                  + ", ".join(f"{r['candidate']} {e:+.0%}" for r, e in zip(w["rows"], loo)) + ".",
                  "", f"Mean |error| {sum(errs) / len(errs):.0%}, max {max(errs):.0%}; within 15%: "
                  f"{sum(e <= 0.15 for e in errs)}/{len(errs)}. `auto` picks **{w['auto']}**; measured best "
                  f"**{w['measured_best']}**; auto's measured time is {w['auto_vs_best']:.2f}x the best.", ""]
    r = data.get("reallocation")
    if r:
        lines += ["## Reallocation (`rollout.reallocate`)", "", r["setup"], "",
                  "| reallocate | iteration s (median) | train s (median) | samples |", "|---|---|---|---|"]
        for row in r["rows"]:
            lines.append(f"| {row['reallocate']} | {row['iteration_s']:.3f} | {row['train_s']:.3f} | {row['n']} |")
        lines += ["", r["note"], ""]
    return "\n".join(lines) + "\n"


def render_whatif() -> str:
    from learner.scheduling import whatif

    lines = ["# What-if: iteration seconds on 8-1,024 GPUs (model, not measured)", "",
             "Laws and workload figures: `learner/scheduling/whatif.py` (module docstring and `WORKLOADS`). "
             "x = speed-up over collocated; realloc = disaggregated with rollout GPUs joining the actor once "
             "generation's bulk is done.", "",
             "| workload | GPUs | collocated s | disaggregated s (rollout GPUs) | hybrid s | + realloc s | disagg x | hybrid x | realloc vs disagg |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in whatif.table():
        lines.append(f"| {r['workload']} | {r['gpus']} | {r['collocated_s']:.1f} | {r['disaggregated_s']:.1f} "
                     f"({r['rollout_gpus']}) | {r['hybrid_s']:.1f} | {r['realloc_s']:.1f} | {r['disagg_x']:.2f} | "
                     f"{r['hybrid_x']:.2f} | {r['realloc_gain']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="embodied,grpo")
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--whatif", action="store_true", help="only write results/whatif.md (no measurements)")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    if args.whatif:
        (RESULTS / "whatif.md").write_text(render_whatif())
        print(render_whatif())
        return 0
    path = RESULTS / "schedule.json"
    data = json.loads(path.read_text()) if path.exists() else {"workloads": {}}
    if not args.render:
        load = os.getloadavg()[0]
        for name in args.workloads.split(","):
            data["workloads"][name] = run_workload(name, args.slots, args.iterations)
        data["meta"] = (f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs (load average "
                        f"{load:.1f} at start, {os.getloadavg()[0]:.1f} at end); median of {args.iterations} "
                        f"iterations after warm-up per candidate; Python {platform.python_version()}.")
        RESULTS.mkdir(exist_ok=True)
        path.write_text(json.dumps(data, indent=1))
    (RESULTS / "schedule.md").write_text(render(data))
    print(render(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
