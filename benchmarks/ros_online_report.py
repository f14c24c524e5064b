"""The report of benchmarks/ros_online.py: benchmarks/results/ros_online.json and .md.

Split out of ros_online.py so the script holds the measurements and this module the rendering
(also used by ``ros_online.py --from-json``); ros_online.py imports it (benchmarks/ is on its
sys.path).
"""

from __future__ import annotations

import json

from bench_results import RESULTS, provenance


def jitter_lines(j: dict) -> list[str]:
    """The (a) table of one served model size."""
    lines = [
        f"### Torch MLP {j['mlp_hidden']}: {j['weights_mb']} MB of weights per push",
        "",
        "| periods | count | long | long rate | longest ms | hold ticks | hold rate |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [
        ("no-push phase, all", j["no_push_phase"]["all"]),
        ("push phase, all", j["push_phase"]["all"]),
        ("push phase, overlapping a *whole* push", j["push_phase"].get("whole")),
        ("push phase, overlapping a *fragmented* push", j["push_phase"].get("fragmented")),
        ("push phase, no push in flight", j["push_phase"]["none"]),
    ]
    for name, g in rows:
        if g:
            lines.append(
                f"| {name} | {g['n']} | {g['long']} | {g['long_rate']:.1%} | {g['max_ms']} | "
                f"{g.get('holds', '-')} | {g.get('hold_rate', 0):.1%} |"
            )
    na, pa = j["no_push_phase"]["all"], j["push_phase"]["all"]
    lines += [
        "",
        f"Period median / p99 / max: no pushes {na['median']} / {na['p99']} / {na['max']} ms; "
        "with pushes "
        f"{pa['median']} / {pa['p99']} / {pa['max']} ms. Hold ticks by the policy client's own "
        "counter: "
        f"{j['no_push_phase']['hold_steps']} without pushes, {j['push_phase']['hold_steps']} with "
        f"(of {j['no_push_phase']['policy_steps'] + j['no_push_phase']['hold_steps']} / "
        f"{j['push_phase']['policy_steps'] + j['push_phase']['hold_steps']} ticks).",
        "",
    ]
    for name, pu in j["pushes"].items():
        lines.append(
            f"- {name} pushes: {pu['n']}, push -> ack median {pu['round_trip_ms'].get('median')} "
            "ms "
            f"(max {pu['round_trip_ms'].get('max')}), server load into the spare median "
            f"{pu['server_load_ms'].get('median')} ms"
        )
    return lines + ["", f"Load average {j['load_avg_1m']} at the end of this run.", ""]


def _facts(result: dict) -> dict:
    m = result["machine"]
    return {
        "command": result.get("command"),
        "machine": m.get("arch"),
        "cpus": m.get("cpus"),
        "date": result.get("date"),
    }


def write_results(result: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ros_online.json").write_text(json.dumps(result, indent=2))
    runs, c, raw = result["jitter"], result["camera"], result["raw_round_trip_ms"]
    runs = [runs] if isinstance(runs, dict) else runs  # results written before --sizes
    j = runs[0]
    lines = [
        "# Online loop on the sim twin (benchmarks/ros_online.py)",
        "",
        *(f"{line}\n" for line in provenance(_facts(result))),
        "The machine is shared with other jobs; 1-min load average per row.",
        "",
        f"## (a) Control-loop period while weights are pushed ({j['control_hz']:g} Hz, nominal "
        f"{j['nominal_ms']} ms)",
        "",
        "A torch MLP served by `PolicyServer` (state-only joint-delta policy client, sim robot "
        "node). "
        f"{j['seconds_no_push']:g} s without pushes, then {j['seconds_push']:g} s with a push "
        "every "
        f"{j['push_every_s']:g} s from a thread of the benchmark process, taking turns: *whole* = "
        "`WeightPusher` (one frame per push), *fragmented* = the same push as 256 KB wire "
        "fragments. A period "
        "overlaps a push if it overlaps [sent - 1 period, acked + 1 period]. Long = > 1.5 x "
        "nominal. A hold "
        "tick re-sends the previous target (no answer within the client's wait, 0.6 of a period).",
        "",
    ]
    for j in runs:
        lines += jitter_lines(j)
    lines += [
        f"## (b) Camera loop with a recorded 224x224 source ({c['target_hz']:g} Hz)",
        "",
        "Raw rclpy round trip (publish -> echo process -> back), same run:",
        "",
        "| message | p50 ms | p99 ms |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {v['p50']} | {v['p99']} |" for k, v in raw.items()]
    oc = c["obs_to_command_ms"]
    lines += [
        "",
        "| target Hz | achieved Hz | policy steps | fresh obs/s | camera fps | obs->command p50 / "
        "p99 ms | "
        "server infer p50 ms | load avg | sustained |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {c['target_hz']:g} | {c['achieved_hz']} | {c['policy_fraction']:.0%} | "
        f"{c['fresh_obs_hz']} | "
        f"{c['camera_fps']:g} | {oc['p50']:.1f} / {oc['p99']:.1f} | {c['infer_ms_p50']:.1f} | "
        f"{c['load_avg_1m']} | {'yes' if c['sustained'] else 'no'} |",
    ]
    lines += ["", result["notes"]]
    (RESULTS / "ros_online.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
