"""The policy alone on the ROS 2 twin: each run's final checkpoint served by ``rlinf serve``
(deterministic), the twin graph by ``rlinf ros up`` with no operator, no streamer and no learned
reward, the twin's judge ending and scoring ``--episodes`` episodes; beside it the same checkpoint
on the simulator's held-out episodes.

    .venv/bin/python benchmarks/ros_twin_policy_alone.py RUN_DIR [RUN_DIR ...]
        [--task push_pixels] [--episodes 50] [--checkpoint initial|iter_N] [--label NAME]
        [--twin KEY=VALUE ...] [--no-lockstep] [--no-sim] [--from-json]

``RUN_DIR`` is a work directory of ``benchmarks/ros_online_rlpd.py`` (``--work``); its newest
checkpoint is scored (``--checkpoint NAME`` picks another, e.g. ``initial``).

Why it exists: an online twin run's held-out figure comes from the simulator of the same scene,
while the twin's own training episodes are driven in part by the scripted operator (takeovers,
success keys). This scores the policy the way a user checks a checkpoint on the bench: the
shipped ``serve`` and ``ros up`` commands, real ROS 2 processes in real time, the task node's
episodes with fresh scenes (``task.seed``), no one to take over.

Each checkpoint runs on the twin twice: in real time, as the online run ran it, and in lock-step
(the twin configs' validation mode: every action answers the observation of the state it is
applied to), so a gap between the twin and the simulator splits into what timing costs (real
time vs lock-step) and what the graph itself changes (lock-step vs simulator).

Writes benchmarks/results/ros_twin_policy_alone_<task>[_<label>].{md,json}; prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import yaml
from ros_bench_env import prepare

ROOT = prepare()

from bench_results import RESULTS, load, load_1min, machine_meta, provenance  # noqa: E402
from online_rig import RLINF, wait_for  # noqa: E402
from ros_online_rlpd_heldout import heldout  # noqa: E402
from ros_online_rlpd_tasks import TASKS  # noqa: E402
from ros_procs import Procs, free_port  # noqa: E402

from rlinf_ros.domains import free_domains  # noqa: E402

TWIN_SEED = 7000  # the task node's scenes: a stream the online runs (seeds 0, 1000, ...) never drew
SIM_SEED_NOTE = "simulator seeds from 50000 (the online benchmark's held-out episodes)"
# the policy alone: the twin's judge ends and scores each episode; no reward node, no streamer,
# no operator (the online run's graph without what the loop added around the policy)
ALONE = {
    "task": {"judge_ends_episodes": True, "seed": TWIN_SEED},
    "reward": {"enabled": False},
    "streamer": {"enabled": False},
    "teleop": {"enabled": False},
}


def overrides_of(tree: dict, prefix: str = "") -> list[str]:
    """``key=value`` words of a nested mapping (``rlinf ros up``'s override grammar).

    >>> overrides_of({"task": {"seed": 3, "judge_ends_episodes": True}})
    ['task.seed=3', 'task.judge_ends_episodes=true']
    """
    words = []
    for k, v in tree.items():
        if isinstance(v, dict):
            words += overrides_of(v, f"{prefix}{k}.")
        else:
            words.append(f"{prefix}{k}={json.dumps(v) if not isinstance(v, str) else v}")
    return words


def checkpoint_of(run_dir: Path, name: str | None) -> Path:
    """The run's newest checkpoint, or the one named ``name`` (``initial`` or ``iter_*``)."""
    out = run_dir / "run"
    if name == "initial":
        return out / "initial"
    found = sorted((out / "checkpoints").glob(name or "iter_*"))
    if not found:
        raise SystemExit(f"{run_dir}: no checkpoint {name or 'iter_*'} under {out / 'checkpoints'}")
    return found[-1]


# the twin in lock-step (the configs' validation mode): each action answers the observation of the
# state it is applied to and the physics advance one simulator control step per action
LOCKSTEP = ["robot.scene.lockstep=true", "policy_client.lockstep=true"]
MODES = {"twin": [], "lockstep": LOCKSTEP}  # results key prefix -> more graph overrides
# the policy client's last line (rlinf_ros.nodes.policy_client.loop_summary): how old the
# observations were when their commands went out, p50 and p99
LOOP_LINE = re.compile(r"policy loop: .*observation -> command p50 (\d+) ms, p99 (\d+) ms")
# the robot node's last line (rlinf_ros.loop_timing.driver_summary): driver tick interval p99,
# ticks a period or more late, physics time dropped
DRIVER_LINE = re.compile(
    r"driver loop: .* p99 (\d+) ms, max \d+ ms, (\d+) late .*physics time dropped ([\d.]+) s"
)
# the robot node's safety counts over the run (one line per arm when it stops)
CLAMPS = re.compile(r"safety over the run: (?:.*?)(\d+) velocity clamps?\b")


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs from ``/proc/stat`` (Linux), else None: the share of a
    pass's CPU time the host took for other guests, which a real-time twin feels and the load
    average does not show."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


def cpu_pressure_us() -> int | None:
    """Total microseconds some task waited for a CPU (``/proc/pressure/cpu``, Linux PSI), else
    None: over a pass, the share of wall time the twin's processes queued for a core."""
    try:
        some = Path("/proc/pressure/cpu").read_text().split("\n")[0]
        return int(some.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None


def pass_timing(log_part: str, key: str) -> dict:
    """Timing of one pass from its part of the graph log: the policy client's observation ->
    command p50 / p99 (ms), the robot node's driver tick p99 (ms), late ticks, physics dropped
    (s) and the velocity clamps its safety summaries counted."""
    out: dict = {}
    if timing := LOOP_LINE.findall(log_part):
        out[f"{key}_obs_to_command_ms"] = [int(x) for x in timing[-1]]
    if driver := DRIVER_LINE.findall(log_part):
        p99, late, dropped = driver[-1]
        out[f"{key}_driver_tick_p99_ms"] = int(p99)
        out[f"{key}_late_ticks"] = int(late)
        out[f"{key}_dropped_s"] = float(dropped)
    if "safety over the run:" in log_part:
        out[f"{key}_velocity_clamps"] = sum(int(n) for n in CLAMPS.findall(log_part))
    return out


def twin_alone(
    ckpt: Path, graph: str, episodes: int, work: Path, extra: list[str], key: str = "twin"
) -> dict:
    """``rlinf serve`` of ``ckpt`` and ``rlinf ros up`` of the twin (``extra``: more overrides of
    the graph) for ``episodes`` judged episodes; the task node's summary (keys ``<key>_*``) plus
    the wall time."""
    work.mkdir(parents=True, exist_ok=True)
    results = work / "episodes.json"
    results.unlink(missing_ok=True)
    port = free_port()
    log = work / "graph.log"  # appended pass after pass: read this pass's part only
    log_start = log.stat().st_size if log.is_file() else 0
    procs = Procs(work)
    t0, load, cpu0, psi0 = time.time(), load_1min(), cpu_times(), cpu_pressure_us()
    try:
        serve = ["serve", "--checkpoint", str(ckpt), "--port", str(port), "--torch-threads", "1"]
        procs.start("server", [RLINF, *serve])
        words = overrides_of(
            {
                **ALONE,
                "task": {**ALONE["task"], "episodes": episodes, "results_path": str(results)},
                "policy_client": {"server_url": f"ws://127.0.0.1:{port}", "reconnect_s": 0.3},
            }
        )
        graph_proc = procs.start("graph", [RLINF, "ros", "up", graph, *words, *extra])
        wait_for(lambda: graph_proc.poll() is not None, 60 + 15 * episodes, "the twin", procs)
        if graph_proc.returncode != 0 or not results.is_file():
            raise SystemExit(f"rlinf ros up exited {graph_proc.returncode}; see {work}/graph.log")
    finally:
        procs.stop_all()
    summary = json.loads(results.read_text())
    cpu1, psi1, wall = cpu_times(), cpu_pressure_us(), time.time() - t0
    host = {}
    if cpu0 and cpu1 and cpu1[1] > cpu0[1]:
        host[f"{key}_steal_share"] = round((cpu1[0] - cpu0[0]) / (cpu1[1] - cpu0[1]), 4)
    if psi0 is not None and psi1 is not None:
        host[f"{key}_cpu_pressure"] = round((psi1 - psi0) / 1e6 / wall, 3)
    with open(log, "rb") as f:
        f.seek(log_start)
        part = f.read().decode(errors="replace")
    return {
        **pass_timing(part, key),
        **host,
        f"{key}_success": round(float(summary["success_rate"]), 3),
        f"{key}_episodes": int(summary["episodes"]),
        f"{key}_aborted": int(summary.get("aborted", 0)),
        f"{key}_s": round(time.time() - t0, 1),
        f"{key}_load_1min": load,
    }


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a success rate over ``n`` episodes (one checkpoint's figure).

    >>> [round(x, 2) for x in wilson(40, 50)]
    [0.67, 0.89]
    """
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


def rate_cell(row: dict, key: str) -> str:
    """``0.80 [0.67, 0.89] (50)``: one mode's success, its Wilson interval and episodes; ``–``
    when the run skipped that mode."""
    if f"{key}_success" not in row:
        return "–"
    n = row[f"{key}_episodes"]
    lo, hi = wilson(round(row[f"{key}_success"] * n), n)
    load = f", load {row[f'{key}_load_1min']}" if f"{key}_load_1min" in row else ""
    ms = row.get(f"{key}_obs_to_command_ms")
    age = f", obs -> command {ms[0]} / {ms[1]} ms" if ms else ""
    steal = row.get(f"{key}_steal_share")
    stolen = f", steal {steal:.1%}" if steal is not None else ""
    psi = row.get(f"{key}_cpu_pressure")
    queued = f", CPU wait {psi:.0%}" if psi is not None else ""
    tick = row.get(f"{key}_driver_tick_p99_ms")
    driver = (
        f", driver tick p99 {tick} ms, {row.get(f'{key}_velocity_clamps', '?')} velocity clamps"
        if tick is not None
        else ""
    )
    notes = f"{n}{load}{age}{stolen}{queued}{driver}"
    return f"{row[f'{key}_success']:.2f} [{lo:.2f}, {hi:.2f}] ({notes})"


def render(meta: dict, rows: list[dict]) -> str:
    from learner.eval.aggregate import estimate

    extra = " ".join(meta.get("twin_overrides", []))
    lines = [
        f"# The policy alone on the ROS 2 twin: {meta['task']}",
        "",
        *provenance(meta),
        "",
        "Each run's checkpoint served by `rlinf serve` (deterministic actions) and the twin by "
        f"`rlinf ros up {meta['graph']} {' '.join(overrides_of(ALONE))}"
        + (f" {extra}" if extra else "")
        + f" task.episodes={meta['episodes']}`: robot node with its cameras, policy client, task "
        "node; no operator, no streamer, no learned reward; the twin's judge ends each episode "
        f"(success, or {meta['max_steps']} steps) on scenes of task seed {TWIN_SEED}. "
        "**Real time**: the graph as the online run ran it (physics on the wall clock, frames at "
        "the camera rate, the policy acting on the newest observation). **Lock-step** (`"
        + " ".join(LOCKSTEP)
        + "`): the same processes, each action answering the observation of the state it is "
        "applied to, one simulator control step of physics per action. **Simulator**: the same "
        f"checkpoint on the simulator's held-out episodes ({SIM_SEED_NOTE}). Success [95% Wilson "
        "interval] (episodes; where recorded, the 1-min load average when that twin started and "
        "the policy client's observation -> command time, p50 / p99, and the share of CPU time "
        "the host took for other guests during the pass, the share of the pass some task waited "
        "for a CPU (PSI), the robot node's driver tick interval p99 and the velocity clamps of "
        "its safety layer). "
        f"Load average (1 min) at the start of the run: {meta.get('load_1min', '?')}.",
        "",
        "| run | checkpoint | twin, real time | twin, lock-step | simulator |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        sim = f"{r['heldout_success']:.2f}" if "heldout_success" in r else "–"
        lines.append(
            f"| {r['run']} | {r['checkpoint']} | {rate_cell(r, 'twin')} "
            f"| {rate_cell(r, 'lockstep')} | {sim} |"
        )
    if len(rows) >= 2:
        parts = []
        for key, name in (
            ("twin_success", "twin real time"),
            ("lockstep_success", "twin lock-step"),
            ("heldout_success", "simulator"),
        ):
            values = [r[key] for r in rows if key in r]
            if len(values) == len(rows):
                parts.append(f"{name} {estimate(values).text()}")
        lines += [
            "",
            f"Over the {len(rows)} runs (IQM, 95% bootstrap over runs, "
            f"`learner/eval/aggregate.py`): {'; '.join(parts)}.",
        ]
    notes = meta.get("notes", [])  # what a reader of the runs noted (repeats, what it shows)
    return "\n".join([*lines, *(x for n in notes for x in ("", n))]) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="work directories of ros_online_rlpd.py")
    ap.add_argument("--task", default="push_pixels", choices=sorted(TASKS))
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--checkpoint", default=None, help="initial | iter_NNNNNN (default: newest)")
    ap.add_argument("--label", default="", help="results stem suffix (which runs these are)")
    ap.add_argument(
        "--twin",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="more overrides of both twin graphs, e.g. 'robot.arms[0].safety.workspace_min=[0.15,"
        "-0.6,0.0]'",
    )
    ap.add_argument("--no-lockstep", action="store_true", help="skip the lock-step twin")
    ap.add_argument("--no-sim", action="store_true", help="skip the simulator's held-out episodes")
    ap.add_argument("--from-json", action="store_true", help="re-render the results file")
    args = ap.parse_args()
    if args.episodes < 1:
        ap.error("--episodes must be >= 1")
    stem = f"ros_twin_policy_alone_{args.task}" + (f"_{args.label}" if args.label else "")
    if args.from_json:
        data = load(stem)
        (RESULTS / f"{stem}.md").write_text(render(data["meta"], data["rows"]))
        return
    if not args.runs:
        ap.error("name at least one run directory (or --from-json)")
    missing = [str(r) for r in args.runs if not (r / "run").is_dir()]
    if missing:
        ap.error(f"not a work directory of ros_online_rlpd.py (no run/ inside): {missing}")
    task = TASKS[args.task]
    graph_cfg = yaml.safe_load((ROOT / task.graph).read_text())
    os.environ["ROS_DOMAIN_ID"] = str(free_domains(1)[0])  # apart from others
    meta = machine_meta(
        task=args.task,
        graph=task.graph,
        episodes=args.episodes,
        max_steps=int(graph_cfg["task"]["max_steps"]),
        twin_overrides=args.twin,
        load_1min=load_1min(),
    )
    overrides = [f"model.encoder.weights={task.encoder.weights}"] if task.encoder else []
    rows = []
    for run_dir in args.runs:
        ckpt = checkpoint_of(run_dir, args.checkpoint)
        row = {"run": run_dir.name, "checkpoint": ckpt.name}
        for key, mode in MODES.items():
            if key == "lockstep" and args.no_lockstep:
                continue
            work = run_dir / f"{key}_alone"
            row |= twin_alone(ckpt, task.graph, args.episodes, work, [*mode, *args.twin], key)
        if not args.no_sim:
            sim = heldout(task.learner, [(0.0, ckpt)], args.episodes, overrides)[0]
            row["heldout_success"] = sim["heldout_success"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    text = render(meta, rows)
    (RESULTS / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
