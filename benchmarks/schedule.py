"""Cost-model prediction error: predicted vs measured iteration time of every candidate.

For each workload: profile (cached; ``--refresh`` re-takes it), then on one Ray cluster
*calibrate* (:mod:`learner.scheduling.calibrate`: the comm profile and the in-process
candidate's measured/predicted factor under the current load), rank every candidate placement /
depth with the calibrated cost model, and run each candidate on the real runner
(``learner.scheduling.plan.measure``) in ``--passes`` passes, the order reversed on each pass
so load drift hits the candidates alike; measured = median of the per-pass medians, and the
spread of a candidate's passes ((max - min) / measured) is reported as its noise: how far the same
placement measured apart within one run. The raw
(uncalibrated) prediction -- profile and cached comm profile as they are -- is kept beside it.
``--bracket N`` runs N iterations of the in-process candidate right before each candidate, and
that run's factor scales its prediction (the "bracketed" error: the model with load drift between
calibration and run taken out). ``auto`` = the candidate with the best calibrated prediction; it is
compared with the measured best. ``--realloc`` first runs the dynamic-reallocation A/B
(``rollout.reallocate``).

    .venv/bin/python benchmarks/schedule.py                      # 3 workloads, ~20-30 min loaded
    .venv/bin/python benchmarks/schedule.py --workloads grpo --passes 1
    .venv/bin/python benchmarks/schedule.py --realloc --workloads ''

Writes ``benchmarks/results/schedule.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_results import RESULTS, machine_meta, now_utc, provenance

WORKLOADS = {  # name -> (config, overrides, description, measured iterations per pass)
    "embodied": (
        "configs/sim_franka_reach_ppo.yaml",
        [],
        "PPO on mujoco_franka/reach, 32 envs x 16 steps, MLP 64x64",
        8,
    ),
    "offpolicy": (
        "configs/sim_franka_reach_sac.yaml",
        ["train.log_every=400", "train.warmup_steps=400", "train.learning_starts=400"],
        "SAC on mujoco_franka/reach, 8 envs, UTD 0.5, batch 128, MLP 256x256; one 'iteration' = "
        "one "
        "metrics row of 400 transitions (200 updates)",
        3,
    ),
    "grpo": (
        "configs/llm_grpo_arith.yaml",
        [],
        "GRPO on 2-digit addition, tiny Llama, 64 prompts x 8 samples",
        5,
    ),
}
REALLOC = (
    "configs/sim_franka_reach_ppo.yaml",
    ["model.hidden=[1024,1024]", "actor.epochs=2", "actor.minibatches=2"],
    {"env,rollout": "0", "actor": "1"},
)


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def run_workload(name: str, slots: int, passes: int, refresh: bool, bracket: int = 2) -> dict:
    from learner.cluster import Cluster
    from learner.scheduling import plan
    from learner.scheduling.calibrate import calibrate
    from learner.scheduling.plan import measure, profile_of, rank
    from rlinf_cli.schedule import _config

    path, overrides, desc, iterations = WORKLOADS[name]
    cfg = _config(path, overrides)
    t0 = time.perf_counter()
    prof = profile_of(cfg, refresh)
    profile_s = time.perf_counter() - t0 if refresh else getattr(prof, "seconds", 0.0)
    raw = {p.candidate.label: p for p in rank(cfg, slots, load_factor=False)}
    cluster = Cluster.local(num_cpus=slots)
    rows: dict[str, dict] = {}
    try:
        cal = calibrate(cfg, slots, cluster)
        print(
            f"{name} calibration: {cal.reference} pred {cal.predicted_s:.3f} meas "
            f"{cal.measured_s:.3f} -> x"
            f"{cal.factor:.2f} (load {cal.load:.1f}, {cal.seconds:.0f} s)",
            flush=True,
        )
        preds = rank(cfg, slots, calibration=cal)
        ref = next(p for p in preds if p.candidate.label == cal.reference)
        for k in range(passes):
            for p in preds if k % 2 == 0 else preds[::-1]:
                label, load0, t1 = p.candidate.label, _load(), time.perf_counter()
                # bracketing: the in-process reference right before, so load drift between the
                # calibration and this run can be told apart from the model's error
                local = (
                    measure(cfg, ref.candidate, cluster, iterations=bracket) / ref.iteration_s
                    if bracket
                    else 1.0
                )
                measured = measure(cfg, p.candidate, cluster, iterations=iterations)
                row = rows.setdefault(
                    label,
                    {
                        "candidate": label,
                        "placement": p.candidate.placement,
                        "mode": p.mode,
                        "raw_predicted_s": raw[label].iteration_s,
                        "predicted_s": p.iteration_s,
                        "breakdown": p.breakdown,
                        "passes": [],
                        "bracketed": [],
                        "load": [],
                        "wall_s": 0.0,
                    },
                )
                row["passes"].append(measured)
                row["bracketed"].append(p.iteration_s * local)
                row.setdefault("phases", []).append(dict(plan.LAST_PHASES))
                row["load"] += [load0, _load()]
                row["wall_s"] += time.perf_counter() - t1
                print(
                    f"{name} pass {k} {label:16s} pred {p.iteration_s:.3f} (raw "
                    f"{raw[label].iteration_s:.3f}) "
                    f"meas {measured:.3f} load {load0}-{_load()}",
                    flush=True,
                )
    finally:
        cluster.shutdown()
    for row in rows.values():
        row["measured_s"] = statistics.median(row["passes"])
        row["noise"] = (max(row["passes"]) - min(row["passes"])) / row["measured_s"]
        row["error"] = (row["predicted_s"] - row["measured_s"]) / row["measured_s"]
        row["raw_error"] = (row["raw_predicted_s"] - row["measured_s"]) / row["measured_s"]
        if bracket:  # per pass: that pass's bracketed prediction vs that pass's measurement
            errs = [(b - m) / m for b, m in zip(row["bracketed"], row["passes"])]
            row["bracketed_error"] = statistics.median(errs)
    out = [rows[p.candidate.label] for p in preds]
    auto = min(out, key=lambda r: r["predicted_s"])
    best = min(out, key=lambda r: r["measured_s"])
    return {
        "description": desc,
        "config": path,
        "overrides": overrides,
        "slots": slots,
        "rows": out,
        "calibration": cal.to_dict(),
        "profile_s": profile_s,
        "passes": passes,
        "iterations": iterations,
        "bracket": bracket,
        "auto": auto["candidate"],
        "measured_best": best["candidate"],
        "auto_vs_best": auto["measured_s"] / best["measured_s"],
    }


def _embodied_history(cfg, cluster, iterations: int) -> list[dict]:
    import tempfile

    from learner.runners import get_runner

    with tempfile.TemporaryDirectory() as tmp:
        cfg.train.iterations, cfg.train.out_dir = iterations, str(Path(tmp) / "run")
        cfg.train.final_eval = cfg.train.tensorboard = cfg.train.progress = False
        cfg.train.checkpoint_every, cfg.train.time_budget_s, cfg.train.resume = 0, None, None
        get_runner("embodied").run(cfg, cluster)
        return json.loads((Path(cfg.train.out_dir) / "metrics.json").read_text())["history"]


def run_realloc(slots: int, passes: int, iterations: int = 8, warmup: int = 2) -> dict:
    """A/B of ``rollout.reallocate`` on the split placement (env+rollout | actor), alternating."""
    import copy

    from learner.cluster import Cluster
    from rlinf_cli.schedule import _config

    path, overrides, placement = REALLOC
    base = _config(path, overrides)
    base.placement = dict(placement)
    samples: dict[bool, dict[str, list[float]]] = {
        False: {"it": [], "train": []},
        True: {"it": [], "train": []},
    }
    cluster = Cluster.local(num_cpus=slots)
    load0 = _load()
    try:
        for k in range(passes):
            for flag in (False, True) if k % 2 == 0 else (True, False):
                cfg = copy.deepcopy(base)
                cfg.rollout.reallocate = flag
                hist = _embodied_history(cfg, cluster, warmup + iterations)[warmup:]
                samples[flag]["it"] += [h["iteration_s"] for h in hist]
                samples[flag]["train"] += [h["time/train_s"] for h in hist]
                print(
                    f"realloc={flag} pass {k}: iteration "
                    f"{statistics.median(h['iteration_s'] for h in hist):.3f} s "
                    f"train {statistics.median(h['time/train_s'] for h in hist):.3f} s load "
                    f"{_load()}",
                    flush=True,
                )
    finally:
        cluster.shutdown()
    rows = [
        {
            "reallocate": f,
            "iteration_s": statistics.median(v["it"]),
            "train_s": statistics.median(v["train"]),
            "n": len(v["it"]),
        }
        for f, v in samples.items()
    ]
    gain = rows[0]["iteration_s"] / rows[1]["iteration_s"]
    setup = (
        f"{path} with {' '.join(overrides)}, placement `{json.dumps(placement)}` on {slots} CPU "
        "slots; "
        f"{warmup + iterations} iterations per run, first {warmup} dropped; {passes} passes in "
        "alternating order; "
        f"load average {load0} at start, {_load()} at end."
    )
    return {"setup": setup, "rows": rows, "gain": gain}


def _loop_md(cal: dict) -> str:
    """The calibration's second reference run (embodied: the channel loop; GRPO: the worker
    driver)."""
    loop = cal.get("loop") or {}
    if "hop_s" in loop:
        return (
            f" Channel loop ({loop['reference']}, measured {loop['measured_s']:.3f} s): env work x "
            f"{loop['env_x']:.2f}, rollout work x {loop['infer_x']:.2f} of the profile, runner hop "
            f"{loop['hop_s'] * 1e3:.1f} ms; channel actors' CPU per round trip "
            f"{cal['comm'].get('channel_cpu_s', 0) * 1e3:.1f} ms."
        )
    if "workers_s" in loop:
        return (
            f" Worker driver ({loop['reference']}, measured {loop['measured_s']:.3f} s): "
            f"{loop['workers_s']:.3f} s per step of streaming work beyond the inline profile."
        )
    return ""


def _workload_md(name: str, w: dict) -> list[str]:
    cal = w["calibration"]
    errs = [abs(r["error"]) for r in w["rows"]]
    over = f" with `{' '.join(w['overrides'])}`" if w.get("overrides") else ""
    refs = {cal["reference"], (cal.get("loop") or {}).get("reference")}
    lines = [
        f"## `{name}`: {w['description']} ({w['config']}{over}, {w['slots']} slots)",
        "",
        f"Calibration (before the measurements): in-process candidate **{cal['reference']}** "
        "predicted "
        f"{cal['predicted_s']:.3f} s, measured {cal['measured_s']:.3f} s -> compute x "
        f"{cal['factor']:.2f};"
        + _loop_md(cal)
        + f" Channel hop 1 KiB same / cross core {cal['comm']['hop_s']['same']['1'] * 1e3:.1f} / "
        f"{cal['comm']['hop_s']['cross']['1'] * 1e3:.1f} ms; load average {cal['load']:.1f}; took "
        f"{cal['seconds']:.0f} s. Measured = median over {w['passes']} passes (order reversed "
        "each pass) of "
        f"the median of {w['iterations']} iterations after warm-up; noise = (max - min) / median "
        "of the "
        "passes. Candidates marked * are the calibration's reference runs (their error is noise by "
        "construction).",
        "",
        "| candidate | placement | mode | raw prediction s | calibrated prediction s | measured s "
        "(per pass) | "
        "noise | load during | error | raw error | bracketed error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in w["rows"]:
        per = ", ".join(f"{x:.3f}" for x in r["passes"])
        br = f"{r['bracketed_error']:+.0%}" if "bracketed_error" in r else "-"
        star = "*" if r["candidate"] in refs else ""
        noise = f"{r['noise']:.0%}" if "noise" in r else "-"
        lines.append(
            f"| {r['candidate']}{star} | `{json.dumps(r['placement'])}` | {r['mode']} | "
            f"{r['raw_predicted_s']:.3f} | {r['predicted_s']:.3f} | {r['measured_s']:.3f} ({per}) "
            f"| {noise} | "
            f"{min(r['load']):.1f}-{max(r['load']):.1f} | {r['error']:+.0%} | "
            f"{r['raw_error']:+.0%} | {br} |"
        )
    lines += [
        "",
        f"Mean |error| {sum(errs) / len(errs):.0%}, max {max(errs):.0%}; within 15%: "
        f"{sum(e <= 0.15 for e in errs)}/{len(errs)}. `auto` picks **{w['auto']}**; measured best "
        f"**{w['measured_best']}**; auto's measured time is {w['auto_vs_best']:.2f}x the best.",
    ]
    if w.get("bracket"):
        be = [abs(r["bracketed_error"]) for r in w["rows"]]
        lines += [
            "",
            f"Bracketed (each run preceded by {w['bracket']} iterations of {cal['reference']}, "
            "whose "
            "measured/predicted factor scales that run's prediction): mean |error| "
            f"{sum(be) / len(be):.0%}, "
            f"max {max(be):.0%}, within 15%: {sum(e <= 0.15 for e in be)}/{len(be)}.",
        ]
    lines.append("")
    return lines


def render(data: dict) -> str:
    lines = ["# Cost model: predicted vs measured iteration time", ""]
    for line in [*provenance(data.get("run", {})), data["meta"]]:
        lines += [line, ""]
    for name, w in data["workloads"].items():
        if "calibration" in w:
            lines += _workload_md(name, w)
    r = data.get("reallocation")
    if r:
        lines += [
            "## Dynamic reallocation (`rollout.reallocate`)",
            "",
            r["setup"],
            "",
            "| reallocate | iteration s (median) | train s (median) | samples |",
            "|---|---|---|---|",
        ]
        for row in r["rows"]:
            lines.append(
                f"| {row['reallocate']} | {row['iteration_s']:.3f} | {row['train_s']:.3f} | "
                f"{row['n']} |"
            )
        lines += [
            "",
            f"Gain (static / reallocating iteration time): **{r['gain']:.2f}x**.",
            "",
            r.get("note", ""),
            "",
        ]
    if data.get("notes"):
        lines += ["## Notes", ""] + [x for note in data["notes"] for x in (note, "")]
    return "\n".join(lines) + "\n"


def render_whatif() -> str:
    from learner.scheduling import whatif

    lines = [
        "# What-if: iteration seconds on 8-1,024 GPUs (model, not measured)",
        "",
        "Command: `python benchmarks/schedule.py --whatif`",
        "",
        "Machine: none (computed from the model; no measurement)",
        "",
        f"Date: {now_utc()}",
        "",
        "Laws and workload figures: `learner/scheduling/whatif.py` (module docstring and "
        "`WORKLOADS`). "
        "x = speed-up over collocated; realloc = disaggregated with rollout GPUs joining the "
        "actor once "
        "generation's bulk is done.",
        "",
        "| workload | GPUs | collocated s | disaggregated s (rollout GPUs) | hybrid s | + "
        "realloc s | disagg x | hybrid x | realloc vs disagg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in whatif.table():
        lines.append(
            f"| {r['workload']} | {r['gpus']} | {r['collocated_s']:.1f} | "
            f"{r['disaggregated_s']:.1f} "
            f"({r['rollout_gpus']}) | {r['hybrid_s']:.1f} | {r['realloc_s']:.1f} | "
            f"{r['disagg_x']:.2f} | "
            f"{r['hybrid_x']:.2f} | {r['realloc_gain']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="embodied,offpolicy,grpo")
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--refresh", action="store_true", help="re-take the workload profiles")
    ap.add_argument("--realloc", action="store_true", help="also run the reallocation A/B (first)")
    ap.add_argument(
        "--bracket",
        type=int,
        default=2,
        help="iterations of the in-process reference run before each candidate (0: off)",
    )
    ap.add_argument(
        "--autogroup-nice",
        type=int,
        default=None,
        help="set this session's scheduler autogroup nice for the run (Linux, restored at exit): "
        "with autogroups on, `nice` orders processes only within a session, so other sessions' "
        "niced jobs still take an equal share of the cores; a negative value lets them yield",
    )
    ap.add_argument(
        "--render", "--from-json", action="store_true", help="only re-render the .md from the JSON"
    )
    ap.add_argument(
        "--whatif", action="store_true", help="only write results/whatif.md (no measurements)"
    )
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    if args.whatif:
        (RESULTS / "whatif.md").write_text(render_whatif())
        print(render_whatif())
        return 0
    path = RESULTS / "schedule.json"
    data = json.loads(path.read_text()) if path.exists() else {"workloads": {}}
    data["workloads"] = {
        k: w for k, w in data["workloads"].items() if "calibration" in w
    }  # older format: dropped
    if "gain" not in data.get("reallocation", {"gain": 0}):
        data.pop("reallocation")
    if not args.render:
        saved = _autogroup(args.autogroup_nice)
        try:
            _measure_all(args, data, path)
        finally:
            _autogroup(saved)
    (RESULTS / "schedule.md").write_text(render(data))
    print(render(data))
    return 0


def _autogroup(nice: int | None) -> int | None:
    """Set this session's autogroup nice (``/proc/self/autogroup``); returns the previous one."""
    if nice is None:
        return None
    try:
        with open("/proc/self/autogroup") as f:
            before = int(f.read().split("nice")[1])
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
        return before
    except (OSError, ValueError, IndexError) as e:
        print(f"autogroup nice not set: {e}", flush=True)
        return None


def _measure_all(args: argparse.Namespace, data: dict, path: Path) -> None:
    """Run the chosen workloads (and the reallocation A/B); results go into ``data`` and
    ``path``."""
    load = _load()
    if args.realloc:
        data["reallocation"] = run_realloc(args.slots, args.passes)
        path.write_text(json.dumps(data, indent=1))
    for name in filter(None, args.workloads.split(",")):
        data["workloads"][name] = run_workload(
            name, args.slots, args.passes, args.refresh, args.bracket
        )
        path.write_text(json.dumps(data, indent=1))  # keep what is done if a later workload fails
    group = ""
    if args.autogroup_nice is not None:
        group = (
            f" This run's session had autogroup nice {args.autogroup_nice} (`--autogroup-nice`), "
            "so other "
            "sessions' niced jobs yielded to it."
        )
    data.pop("earlier", None)  # summaries of superseded runs (git keeps them)
    data["run"] = machine_meta()
    data["meta"] = (
        f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs (1-min load "
        f"average {load} at start, {_load()} at end of the last run; per-candidate loads in the "
        f"tables); Python {platform.python_version()}.{group}"
    )
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
