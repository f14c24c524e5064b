"""The fleet benchmark's reading: which part gives out first at each size, the table and the
findings written to ``benchmarks/results/fleet_ingest*.md`` (``benchmarks/fleet_ingest.py``
measures; this module judges and renders, also when ``--from-json`` re-renders stored rows).

The fleet's settings live here too, so the measuring side and the text that states them agree.
"""

from __future__ import annotations

from typing import Any

from bench_results import write_table

STEM = "fleet_ingest"
STATE_DIM, ACTION_DIM, EPISODE_STEPS, EPISODES = 32, 7, 50, 8
HZ, UTD, BATCH, BACKLOG_CAP = 20.0, 1.0, 128, 5000


def derive(row: dict[str, Any]) -> dict[str, Any]:
    """The row's reading from its measured figures (also redone when ``--from-json``
    re-renders, so a stored row is read by the current rule).

    Two ways to fall behind: the ingest stores less than the robots put (the rest waits in
    their spools), or the learner trains on less than the ingest stores (owed updates pile up).
    """
    row["ingest_behind"] = (
        row["stored_tps"] < 0.95 * row["put_tps"] or row["backlog_robots"] > 2 * 64 * row["robots"]
    )
    row["learner_behind"] = (
        row["learner_tps"] < 0.95 * row["stored_tps"] or row["dropped_updates"] > 0
    )
    row["saturated"] = row["ingest_behind"] or row["learner_behind"]
    row["first_limit"] = first_limit(row)
    return row


def ingest_limit(r: dict[str, Any]) -> str:
    """The ingest-side part nearest its ceiling once the ingest falls behind (writer busy share
    of wall for the store writer, CPU share of the cores otherwise; robots: their ticker fell
    behind)."""
    if r["robots_late_ticks"] > r["robots"] * r["seconds"]:
        return "robots' process (ticker behind)"
    if not _in_process(r) and r["writer_busy"] > 0.85:
        return "ingest store writer (serial, busy {:.0%})".format(r["writer_busy"])
    return "ingest (cores shared by all)"


def first_limit(r: dict[str, Any]) -> str:
    """What gives out at this size: the learner when it trains on less than is stored, the
    ingest's limiting part when it stores less than the robots put."""
    limits = []
    if r["learner_behind"]:
        dropped = r["dropped_updates"]
        limits.append(
            f"learner ({r['learner_tps']:g} of {r['stored_tps']:g} stored tr/s trained"
            + (f", {dropped:g} owed updates dropped)" if dropped else ")")
        )
    if r["ingest_behind"]:
        limits.append(ingest_limit(r))
    return "; ".join(limits) or "none (keeps up)"


COLUMNS = [
    ("robots", lambda r: r["robots"]),
    ("offered tr/s", lambda r: r["offered_tps"]),
    ("put tr/s", lambda r: r["put_tps"]),
    ("stored tr/s", lambda r: r["stored_tps"]),
    ("learner upd/s", lambda r: r["learner_ups"]),
    ("learner tr/s (upd/s / utd)", lambda r: r["learner_tps"]),
    ("backlog robots / ingest", lambda r: f"{r['backlog_robots']} / {r['backlog_ingest']}"),
    ("lost / dup", lambda r: f"{r['lost']} / {r['duplicated']}"),
    ("feed dropped", lambda r: r.get("dropped_feed", "n/a")),
    ("fairness min / max", lambda r: f"{r['fair_min']} / {r['fair_max']}"),
    (
        "CPU ingest (writer) / learner / robots",
        lambda r: (
            f"{r['cpu_ingest']:.0%} ({r['cpu_store_writer']:.0%}) / "
            f"{r['cpu_learner']:.0%} / {r['cpu_robots']:.0%}"
        ),
    ),
    ("writer busy", lambda r: "n/a" if _in_process(r) else f"{r['writer_busy']:.0%}"),
    ("ingest ms CPU / tr", lambda r: r["ingest_cpu_ms_per_tr"]),
    ("writer ms / tr", lambda r: "n/a" if _in_process(r) else r["writer_ms_per_tr"]),
    ("ingest MB/s", lambda r: r["ingest_mb_s"]),
    ("load 1m start / end", lambda r: f"{r['load_start']} / {r['load_end']}"),
    ("first limit", lambda r: r["first_limit"]),
]


def _in_process(r: dict[str, Any]) -> bool:
    """The row's ingest ran in a process of its own (its store writer is not timed there)."""
    return r.get("ingest") == "process"


def stem(camera: int, one_core: bool, process: bool = False) -> str:
    """Results file stem: the state-only fleet or the fleet with a camera of that size, with
    ``_one_core`` when the run was pinned to one core (``taskset -c 1``) and ``_process`` when
    the ingest ran in a process of its own."""
    return (
        STEM
        + ("_process" if process else "")
        + (f"_camera{camera}" if camera else "")
        + ("_one_core" if one_core else "")
    )


def render(meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    camera = int(meta.get("camera", 0))
    images = f"one {camera} x {camera} camera" if camera else "no images"
    intro = [
        f"Each size: {meta['seconds']:g} s window after every robot connected; robots replay "
        f"{EPISODES} recorded {EPISODE_STEPS}-step episodes (state {STATE_DIM}-d, action "
        f"{ACTION_DIM}-d, {images}, {rows[0]['bytes_per_item'] if rows else '?'} B per item on "
        f"the wire) at {HZ:g} Hz each through the streamer client (window 64, batch 16). "
        f"Store and spools under {meta.get('store_root', '?')}. "
        f"Learner: state-SAC-sized torch update (batch {BATCH}), utd {UTD:g}, per-robot replay, "
        f"owed updates capped at {BACKLOG_CAP}. Store fsync off (the ingest default).",
        f"Placement: {meta['placement']}. Load average (1 min) at start {meta['load_start']}, "
        f"at end {meta['load_end']}: the machine is shared, so CPU shares are of a core other "
        "processes also use.",
        (
            "Ingest in a process of its own (ingest.process: true): the learner's process holds "
            "only the learner and the feed's receiving end. "
            if meta.get("ingest") == "process"
            else "Ingest embedded in the learner's process (the default). "
        )
        + "tr = transitions (steps; end items are not counted). CPU columns: share of one core "
        "over the window (ingest: "
        + (
            "the ingest process's whole CPU, store writer not timed separately; "
            if meta.get("ingest") == "process"
            else "every learner-process thread but the learner's -- event loop, store writer (in "
            "brackets) and zarr's I/O threads; "
        )
        + "learner thread; the robots' whole "
        "process). Writer busy: wall share the store writer spent storing. "
        "Fairness: each robot's stored transitions over the mean (1.0 = equal). Lost / dup: "
        "read back from the store, every step up to each robot's last acknowledged seq. "
        "Backlog: robots = items spooled and not acknowledged at the end; ingest = received "
        "not stored + feed queue + open segments. Feed dropped: stored steps the learner's feed "
        "queue dropped (full) before they reached the replay.",
    ]
    write_table(
        stem(camera, len(meta.get("cores", [0, 1])) == 1, meta.get("ingest") == "process"),
        "Fleet of robots into one ingest + learner",
        intro + findings(rows),
        meta,
        rows,
        COLUMNS,
    )


def findings(rows: list[dict[str, Any]]) -> list[str]:
    """The reading of the table, from its own figures."""
    if not rows:
        return []
    sat = [r for r in rows if r["ingest_behind"]]
    keeps = [r["robots"] for r in rows if not r["ingest_behind"]]
    trains = [r["robots"] for r in rows if not r["learner_behind"]]
    lags = [r for r in rows if r["learner_behind"]]
    peak = max(rows, key=lambda r: r["stored_tps"])
    cpu = [r["ingest_cpu_ms_per_tr"] for r in rows]
    wall = [r["writer_ms_per_tr"] for r in rows]
    first = next((r for r in rows if r["saturated"]), None)
    lines = [
        "Findings (from the rows above). The ingest stores all the robots put at "
        f"{', '.join(map(str, keeps)) or 'no size'} robot(s); "
        + (
            f"from {sat[0]['robots']} robots the stored rate stays at "
            f"{min(r['stored_tps'] for r in sat):g}-{max(r['stored_tps'] for r in sat):g} tr/s "
            f"(peak {peak['stored_tps']:g} at {peak['robots']}) whatever is offered, and the rest "
            f"waits in the robots' spools (backlog column): {ingest_limit(sat[0])}. "
            if sat
            else "it never fell behind. "
        )
        + f"The learner trains on all that is stored at {', '.join(map(str, trains)) or 'no size'}"
        " robot(s)"
        + (
            f"; from {lags[0]['robots']} robots it trains on "
            f"{min(r['learner_tps'] for r in lags):g}-{max(r['learner_tps'] for r in lags):g} tr/s "
            "of what is stored (owed updates pile up to the cap, then are dropped); its thread "
            + (
                "has its own process and got "
                if _in_process(lags[0])
                else "shares the ingest's process (interpreter lock) and got "
            )
            + f"{min(r['cpu_learner'] for r in lags):.0%}-"
            f"{max(r['cpu_learner'] for r in lags):.0%} of a core. "
            if lags
            else ". "
        )
        + (
            f"First to give out: at {first['robots']} robots, {first['first_limit']}. "
            if first
            else "Nothing gave out at these sizes. "
        )
        + (
            f"Each stored step costs {min(cpu):g}-{max(cpu):g} ms of the ingest process's CPU "
            "(event loop, wire, zarr writes of every field and the commits); the robots are far "
            "from their limit (robots' "
            if _in_process(rows[0])
            else f"Each stored step costs {min(wall):g}-{max(wall):g} ms of the single writer's "
            f"wall time, of which {min(cpu):g}-{max(cpu):g} ms ingest CPU (zarr writes of every "
            "field and the commit, once per turn's batch of a robot's steps), so one ingest tops "
            "out near 1000 / writer-ms tr/s; the event loop, wire and robots are far from theirs "
            "(robots' "
        )
        + f"process <= {max(r['cpu_robots'] for r in rows):.0%} of a core, late ticks "
        f"{max(r['robots_late_ticks'] for r in rows)}). A robot's steps reach the replay when "
        "its episode ends, so at many robots per ingest an episode takes minutes to complete "
        "(ingest backlog column).",
        "Correctness under saturation: lost / duplicated 0 at every size (store read back); "
        f"fairness min / max {min(r['fair_min'] for r in rows):g} / "
        f"{max(r['fair_max'] for r in rows):g} of the mean (the fair drain: each robot one turn "
        "of <= turn_items per cycle).",
    ]
    return lines
