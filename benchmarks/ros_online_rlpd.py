"""Online RLPD on the ROS 2 sim twin: robot node -> policy server -> streamer -> learner -> weights
-> policy server, from 20 scripted-teleop demos. Held-out success vs wall time.

    .venv/bin/python benchmarks/ros_online_rlpd.py [--task reach|push] [--demos 20] [--minutes 20]
                                                   [--eval-episodes 50]

``--task`` picks the twin graph, learner config and scripted human (:data:`TASKS`): reach
(configs/ros_sim_franka.yaml + ros_online_rlpd.yaml) or push (the push twin,
configs/ros_sim_franka_push.yaml + ros_online_rlpd_push.yaml, the scripted pusher,
``teleop.script.task: push``).

Every piece runs as the shipped commands, as real processes (random ROS_DOMAIN_ID):

1. ``rlinf collect GRAPH.yaml --episodes 20`` on the twin (MuJoCo Panda robot node, policy client
   without a server, the ``scripted`` teleop device driving every tick, task judge, recorder).
2. ``rlinf train configs/ros_online_rlpd.yaml`` (learner + ingest + weight push): pretrains on the
   demos, writes ``initial``; ``rlinf serve --checkpoint .../initial server.deterministic=false``;
   the twin graph with the streamer on (``rlinf_ros.nodes.*``: robot, policy client, task in
   endless mode, streamer). The learner stops at its time budget (``--minutes``).
3. Held-out success of the initial actor (the demos-only level) and of every checkpoint the
   learner wrote (each ``train.checkpoint_every`` transitions), deterministic, on the simulator
   of the same task (same scene and physics as the twin, seeds the twin never saw), after the
   run so the evaluation takes no CPU from it. Wall time = checkpoint time - robot start.

Writes benchmarks/results/ros_online_rlpd.{md,json,png}; prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "rlinf_ros"))
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from bench_results import RESULTS, load, machine_meta, write_table  # noqa: E402
from online_rig import (  # noqa: E402
    GRAPH_NODES,
    RLINF,
    TOKENS,
    learner_args,
    start_server,
    twin_graph,
    wait_for,
)
from ros_procs import Procs, free_port  # noqa: E402

STEM = "ros_online_rlpd"


@dataclass(frozen=True)
class BenchTask:
    graph: str  # the twin graph (robot node world, policy client spec, task judge)
    learner: str  # the learner config (env = the simulated task of the robot spec)
    script: str  # the scripted human of the demos (teleop device scripted, script.task)
    stem: str  # results file stem
    action: dict | None = None  # robot_spec.action overrides (reach: the learner's ee_delta_pos)


TASKS = {
    "reach": BenchTask(
        "configs/ros_sim_franka.yaml",
        "configs/ros_online_rlpd.yaml",
        "reach",
        STEM,
        {"control": "ee_delta_pos", "dim": 4},
    ),
    "push": BenchTask(
        "configs/ros_sim_franka_push.yaml",
        "configs/ros_online_rlpd_push.yaml",
        "push",
        f"{STEM}_push",
    ),
}
TASK = TASKS["reach"]


def task_base() -> dict:
    cfg = yaml.safe_load((ROOT / TASK.graph).read_text())
    if TASK.action:
        cfg["policy_client"]["robot_spec"]["action"].update(TASK.action)
    return cfg


def task_graph(work: Path, server_port: int, ingest_port: int) -> Path:
    """The twin graph of the online run: policy server, endless episodes, streamer on."""
    if TASK is TASKS["reach"]:
        return twin_graph(work, server_port, ingest_port)
    cfg = task_base()
    cfg["policy_client"].update(server_url=f"ws://127.0.0.1:{server_port}", reconnect_s=0.3)
    cfg["task"].update(episodes=0, results_path=str(work / "episodes.json"))
    cfg["streamer"] = {
        "enabled": True,
        "stream": {
            "url": f"ws://127.0.0.1:{ingest_port}/transitions",
            "robot_id": "twin0",
            "spool_dir": str(work / "spool"),
            "backoff_s": 0.2,
            "backoff_max_s": 1.0,
        },
        "episodes": {"source": "online"},
    }
    path = work / "graph.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def collect_demos(work: Path, n: int, procs: Procs) -> dict:
    """``rlinf collect`` on the twin with the scripted human driving every tick."""
    import subprocess

    cfg = task_base()
    cfg["task"].update(results_path=str(work / "demo_episodes.json"), warmup_s=2.0)
    cfg["policy_client"]["server_url"] = ""
    cfg["teleop"] = {
        "enabled": True,
        "device": "scripted",
        "rate_hz": 20.0,
        "always_intervene": True,
        "script": {"task": TASK.script},
    }
    graph = work / "graph_demos.yaml"
    graph.write_text(yaml.safe_dump(cfg))
    t0 = time.time()
    with open(work / "collect.log", "ab") as f:
        rc = subprocess.run(
            [RLINF, "collect", str(graph), "--episodes", str(n), "--out", str(work / "demos")],
            cwd=ROOT,
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=120 + 40 * n,
        ).returncode
    if rc != 0:
        raise SystemExit(f"rlinf collect exited {rc}; see {work / 'collect.log'}")
    from rlinf_data.store import EpisodeStore

    eps = [
        e for e in EpisodeStore(work / "demos", mode="r") if e.info.status != "aborted" and len(e)
    ]
    return {
        "episodes": len(eps),
        "successes": int(sum(e.info.success for e in eps)),
        "steps": int(sum(len(e) for e in eps)),
        "collect_s": round(time.time() - t0, 1),
    }


def online(work: Path, minutes: float, checkpoint_every: int, procs: Procs) -> tuple[float, dict]:
    """Learner + server + twin graph until the learner's budget ends; returns (robot start,
    final)."""
    ingest_port, server_port = free_port(), free_port()
    out = work / "run"
    args = learner_args(
        out,
        work / "demos",
        ingest_port,
        server_port,
        f"train.time_budget_s={minutes * 60 + 60}",
        "train.final_eval=false",
        f"train.checkpoint_every={checkpoint_every}",
    )
    args[2] = str(ROOT / TASK.learner)
    procs.start("learner", args)
    start_server(procs, out, server_port)
    graph = task_graph(work, server_port, ingest_port)
    t_robot = time.time()
    for kind in GRAPH_NODES:
        procs.start_node(kind, graph)
    wait_for(
        lambda: procs.procs["learner"].poll() is not None,
        minutes * 60 + 600,
        "the learner's budget",
        procs,
    )
    if procs.procs["learner"].returncode != 0:
        raise SystemExit(f"learner exited {procs.procs['learner'].returncode}\n{procs.logs()}")
    return t_robot, json.loads((out / "metrics.json").read_text())


def heldout(work: Path, t_robot: float, episodes: int) -> list[dict]:
    """Deterministic held-out success of ``initial`` and each checkpoint on the simulator."""
    from learner.checkpoint import load_policy
    from learner.eval.embodied import evaluate_config
    from learner.offpolicy.config import OffPolicyConfig
    from rlinf_contracts.config import from_dict, load_config

    out = work / "run"
    for k, v in TOKENS.items():
        os.environ.setdefault(k, v)
    cfg = from_dict(OffPolicyConfig, load_config(str(ROOT / TASK.learner), ["push.url="]))
    cfg.train.progress = False
    ckpts = [(0.0, out / "initial")] + sorted(
        (max(0.0, (p / "meta.json").stat().st_mtime - t_robot), p)
        for p in (out / "checkpoints").glob("iter_*")
    )
    rows = []
    for wall, path in ckpts:
        policy, meta = load_policy(str(path))
        res = evaluate_config(
            policy, cfg, episodes, seed=50_000, video_path=None, deadline=None, progress=False
        )
        split = next(iter(res.values()))
        counters = meta.get("counters", {}) if isinstance(meta, dict) else {}
        rows.append(
            {
                "checkpoint": path.name,
                "wall_s": round(wall, 1),
                "transitions": int(counters.get("env_steps", 0)),
                "updates": int(counters.get("updates", 0)),
                "heldout_success": round(float(split["success_rate"]), 3),
                "episodes": int(split["episodes"]),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def plot(
    rows: list[dict], history: list[dict], path: Path, target: float, task: str = "reach"
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(
        [r["wall_s"] / 60 for r in rows],
        [r["heldout_success"] for r in rows],
        "o-",
        label="held-out success (sim, deterministic)",
    )
    twin = [(h["time/wall_s"] / 60, h["success_rate"]) for h in history if "success_rate" in h]
    if twin:
        ax.plot(*zip(*twin), ".--", alpha=0.6, label="twin training episodes (sampled, last 100)")
    ax.axhline(target, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("wall time since the robot started (min)")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(
        f"online RLPD over ROS 2 ({task}): twin -> server -> streamer -> learner -> weights",
        fontsize=9,
    )
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def render(stem: str, meta: dict, rows: list[dict]) -> str:
    """Write ``results/<stem>.{json,md}`` from a run's meta and held-out rows; returns the
    verdict."""
    task = meta.get("task", "reach")
    target, minutes = meta["target"], meta["minutes"]
    hit_s, best = meta.get("first_at_target_s"), meta["best"]
    hit = next((r for r in rows if hit_s is not None and r["wall_s"] == hit_s), None)
    verdict = f"held-out success {rows[0]['heldout_success']:.2f} (demos only) -> " + (
        f"{hit['heldout_success']:.2f} at {hit['wall_s'] / 60:.1f} min (target {target} met)"
        if hit
        else f"best {best['heldout_success']:.2f} at {best['wall_s'] / 60:.1f} min "
        f"(target {target} NOT met)"
    )
    intro = [
        f"`benchmarks/ros_online_rlpd.py`: {meta['demo_episodes']} scripted-teleop demos "
        "collected on "
        f"the twin with `rlinf collect`, then online RLPD (`{meta['learner']}`, {minutes:g} min) "
        "through robot node -> policy server -> streamer -> learner -> weights -> policy server, "
        "all "
        f"real processes over DDS on a {meta['cpus']}-core machine shared with other jobs (1-min "
        "load "
        f"{meta['load_1min_start']:.1f} at start, {meta['load_1min_end']:.1f} at end). One run "
        "(one "
        "seed).",
        f"Result: {verdict}. {meta['transitions'] or 0:.0f} transitions streamed, "
        f"{meta['updates'] or 0:.0f} updates, {meta['pushes'] or 0:.0f} weight pushes "
        f"({meta['push_failures'] or 0:.0f} failed); ingest duplicates "
        f"{meta['ingest_duplicates'] or 0:.0f}, gaps {meta['ingest_gaps'] or 0:.0f}.",
        f"Held-out = deterministic actor on the simulator of the same task (mujoco_franka/{task}, "
        f"{meta['eval_episodes']} episodes, seeds the twin never used), evaluated after the run. "
        f"Curve: `benchmarks/results/{stem}.png`. The twin curve's clock is the learner's (it "
        "starts "
        "before the robot: start-up, demo pretraining, the server); failed pushes are those sent "
        "before `rlinf serve` was up (the pusher retries).",
    ]
    cols = [
        ("checkpoint", lambda r: r["checkpoint"]),
        ("wall (min)", lambda r: f"{r['wall_s'] / 60:.1f}"),
        ("transitions", lambda r: r["transitions"]),
        ("updates", lambda r: r["updates"]),
        ("held-out success", lambda r: f"{r['heldout_success']:.2f}"),
    ]
    write_table(stem, f"Online RLPD over ROS 2 on the sim twin ({task})", intro, meta, rows, cols)
    return verdict


def main() -> None:
    global TASK
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=sorted(TASKS), default="reach")
    ap.add_argument("--demos", type=int, default=20)
    ap.add_argument(
        "--minutes", type=float, default=20.0, help="online learning time (learner budget)"
    )
    ap.add_argument(
        "--checkpoint-every", type=int, default=1000, help="transitions between checkpoints"
    )
    ap.add_argument("--eval-episodes", type=int, default=50)
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument("--work", default=None, help="default runs/bench_<stem>")
    ap.add_argument("--keep-demos", action="store_true", help="reuse <work>/demos when it exists")
    ap.add_argument(
        "--from-json", action="store_true", help="only re-render results/<stem>.md from its JSON"
    )
    a = ap.parse_args()
    TASK = TASKS[a.task]
    stem = TASK.stem
    if a.from_json:
        data = load(stem)
        print(render(stem, data["meta"], data["rows"]))
        return
    a.work = a.work or f"runs/bench_{stem}"
    os.environ["ROS_DOMAIN_ID"] = str(random.randint(120, 200))  # apart from other DDS users here
    os.environ["RMW_IMPLEMENTATION"] = "rmw_fastrtps_cpp"
    os.environ.update(TOKENS)
    work = (ROOT / a.work).resolve()
    demos_kept = a.keep_demos and (work / "demos").is_dir()
    for child in work.iterdir() if work.is_dir() else []:
        if not (demos_kept and child.name in ("demos", "collect.log", "demo_episodes.json")):
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    work.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    procs = Procs(work)
    try:
        demo = {"reused": True} if demos_kept else collect_demos(work, a.demos, procs)
        print(f"demos: {demo}", flush=True)
        t_robot, metrics = online(work, a.minutes, a.checkpoint_every, procs)
    finally:
        procs.stop_all()
    load1 = os.getloadavg()[0]
    rows = heldout(work, t_robot, a.eval_episodes)
    final = metrics["final"]
    hit = next(
        (r for r in rows if r["heldout_success"] >= a.target and r["wall_s"] <= a.minutes * 60),
        None,
    )
    best = max(rows, key=lambda r: r["heldout_success"])
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(rows, metrics["history"], RESULTS / f"{stem}.png", a.target, a.task)
    meta = machine_meta(
        task=a.task,
        demo_episodes=a.demos,
        graph=TASK.graph,
        learner=TASK.learner,
        demos=demo,
        minutes=a.minutes,
        eval_episodes=a.eval_episodes,
        target=a.target,
        load_1min_start=round(load0, 2),
        load_1min_end=round(load1, 2),
        transitions=final.get("env_steps"),
        updates=final.get("updates"),
        pushes=final.get("push/pushes"),
        push_failures=final.get("push/failures"),
        ingest_duplicates=final.get("ingest/duplicates"),
        ingest_gaps=final.get("ingest/gaps"),
        twin_success_last100=final.get("success_rate"),
        first_at_target_s=hit["wall_s"] if hit else None,
        best=best,
    )
    verdict = render(stem, meta, rows)
    print(verdict)
    print((RESULTS / f"{stem}.md").read_text())


if __name__ == "__main__":
    main()
