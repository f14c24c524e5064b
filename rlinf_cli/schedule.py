"""``rlinf schedule CONFIG [key=value ...]``: rank placements and pipeline depths by predicted time.

Profiles the workload (cached per workload, <= 60 s) and the machine's channels (cached per
machine), evaluates the cost model (``learner.scheduling``) for every candidate placement and
depth on the slots the config's cluster will have, and prints them best first with the
predicted iteration (or step) time, start-up and whole-run time. ``--measure`` then runs each
candidate for a few iterations on the real runner and prints measured time and prediction
error; it calibrates first (``--calibrate`` alone: calibrate and rank), measuring channel latency
and the in-process candidate under the machine's current load
(:mod:`learner.scheduling.calibrate`). ``placement: auto`` in a config picks the first row.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "schedule", help="rank candidate placements / pipeline depths by predicted iteration time"
    )
    p.add_argument("config", help="YAML config (runner: embodied, reasoning or offpolicy)")
    p.add_argument("overrides", nargs="*", help="key=value overrides")
    p.add_argument(
        "--slots",
        type=int,
        default=None,
        help="slots to plan for (default: what the cluster will have)",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="run each candidate briefly; print measured time and error",
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=4,
        help="measured iterations per candidate (after warm-up)",
    )
    p.add_argument(
        "--refresh", action="store_true", help="profile again instead of using the cache"
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="first measure channel latency and the in-process candidate under the current load "
        "(~15-40 s); predictions use it and `placement: auto` reuses it (implied by --measure)",
    )
    p.add_argument("--json", action="store_true", help="print the ranking as JSON")
    p.set_defaults(run=run)


def _config(path: str, overrides: list[str]) -> Any:
    from rlinf_cli.runner_lookup import runner_spec
    from rlinf_contracts.config import from_dict, load_config

    raw = load_config(path, overrides)
    if raw.get("placement") == "auto":
        raw.pop("placement")  # the word is what we rank for: profile from the default placement
    return from_dict(runner_spec(str(raw.get("runner", "embodied"))).config_cls, raw)


def rows(preds: list[Any], iterations: int) -> list[dict[str, Any]]:
    out = []
    for p in preds:
        row = {
            "candidate": p.candidate.label,
            "placement": p.candidate.placement,
            "mode": p.mode,
            "predicted_s": round(p.iteration_s, 4),
            "startup_s": round(p.startup_s, 1),
            "run_s": round(p.total_s(iterations), 1),
        }
        if p.measured_s is not None:
            row.update(measured_s=round(p.measured_s, 4), error=round(p.error or 0.0, 3))
        out.append(row)
    return out


def table(data: list[dict[str, Any]]) -> str:
    head = (
        f"{'#':>2} {'candidate':22s} {'mode':13s} {'pred s/it':>9s} {'start s':>7s} {'run s':>7s}"
    )
    measured = any("measured_s" in r for r in data)
    if measured:
        head += f" {'meas s/it':>9s} {'error':>7s}"
    lines = [head]
    for i, r in enumerate(data, 1):
        line = (
            f"{i:>2} {r['candidate']:22s} {r['mode']:13s} {r['predicted_s']:9.3f} "
            f"{r['startup_s']:7.1f} {r['run_s']:7.1f}"
        )
        if measured and "measured_s" in r:
            line += f" {r['measured_s']:9.3f} {r['error']:+7.1%}"
        lines.append(line + f"  {json.dumps(r['placement'])}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from learner.cluster import Cluster, expected_slots
    from learner.scheduling.plan import measure, rank, run_length

    cfg = _config(args.config, args.overrides)
    slots = args.slots or (expected_slots(cfg.cluster) or (1, "cpu"))[0]
    if not (args.measure or args.calibrate):
        preds = rank(cfg, slots, refresh=args.refresh)
    else:
        from learner.scheduling.calibrate import calibrate
        from learner.scheduling.plan import profile_of

        profile_of(cfg, args.refresh)  # profile before Ray's processes share the cores
        cluster = Cluster.local(num_cpus=slots)
        try:
            cal = calibrate(cfg, slots, cluster)
            print(
                f"calibration: {cal.reference} predicted {cal.predicted_s:.3f} s, "
                f"measured {cal.measured_s:.3f} s -> compute x {cal.factor:.2f}; "
                f"load average {cal.load:.1f}"
            )
            if cal.loop:
                print(
                    "calibration, runner's own channels: "
                    + ", ".join(
                        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in cal.loop.items()
                    )
                )
            preds = rank(cfg, slots, calibration=cal)
            for p in preds if args.measure else []:
                p.measured_s = measure(cfg, p.candidate, cluster, iterations=args.iterations)
                log.info(
                    "%s: predicted %.3f s, measured %.3f s",
                    p.candidate.label,
                    p.iteration_s,
                    p.measured_s,
                )
        finally:
            cluster.shutdown()
    data = rows(preds, run_length(cfg))
    print(json.dumps(data, indent=1) if args.json else table(data))
    return 0
