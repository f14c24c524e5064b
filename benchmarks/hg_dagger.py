"""HG-DAgger rounds against the sim twin over ROS 2, with a scripted human that takes over when
the policy drifts.

    .venv/bin/python benchmarks/hg_dagger.py [--demos 3] [--rounds 4] [--episodes 5]
                                             [--updates 2000]

Every step runs through the shipped commands as real processes (random ROS_DOMAIN_ID):

1. ``rlinf collect GRAPH.yaml`` with ``policy_client.server_url: ''`` and the ``scripted``
   teleop device driving every tick: ``--demos`` teleop demonstrations of reach on the twin
   (MuJoCo Panda robot node + policy client + teleop + task judge + recorder).
2. ``rlinf train`` (offline runner, ``algorithm.name: bc``) on the aggregate dataset: the demos
   plus every intervention-labelled step of earlier rounds (HG-DAgger learns from the human's
   corrections only); the runner's held-out evaluation on the simulator (same scene and physics
   as the twin, no human) is the policy's own success.
3. ``rlinf serve`` the first policy (with a weights token); later policies are pushed to the
   running server with :class:`~policy_server.push.WeightPusher` (the online loop's path).
4. A round: ``rlinf collect GRAPH.yaml --episodes N`` with the server set and the scripted human
   in drift mode (``rlinf_ros.teleop.scripted``: it takes over when the distance to the goal has
   not shrunk by ``progress_m`` within ``patience_s`` and hands back within ``release_m``);
   intervention steps are labelled ``intervention: true`` in the store. Then 2. and 3. again.

The table: per round, the served policy's held-out success (simulator, no human), and on the
twin the intervention ratio (human steps / steps), assisted success, and the episodes the policy
finished alone. Writes benchmarks/results/hg_dagger.{md,json,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from rlinf_ros.domains import free_domains

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_results import RESULTS, now_utc, provenance, run_command  # noqa: E402

RLINF = [str(Path(sys.executable).parent / "rlinf")]
TOKEN = "hg-dagger-weights-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd: list[str], log: Path, timeout: float) -> None:
    """Run a CLI command (output to ``log``); an error names the command and shows the log's
    tail."""
    t0 = time.time()
    with open(log, "ab") as f:
        rc = subprocess.run(
            cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=timeout
        ).returncode
    if rc != 0:
        raise SystemExit(
            f"rlinf {' '.join(cmd[1:])} exited {rc} after {time.time() - t0:.0f} s; log {log}:\n"
            + log.read_text(errors="replace")[-3000:]
        )


def graph_config(
    work: Path,
    server: str,
    patience_s: float,
    progress_m: float,
    release_m: float,
    regress_m: float | None,
) -> Path:
    """The twin graph (configs/ros_sim_franka.yaml) with the scripted human: driving every tick
    without a server (demonstrations), in drift mode with one (HG-DAgger rounds)."""
    cfg = yaml.safe_load((ROOT / "configs/ros_sim_franka.yaml").read_text())
    cfg["task"].update(results_path=str(work / "task_episodes.json"), warmup_s=2.0)
    cfg["policy_client"]["server_url"] = server
    cfg["teleop"] = {
        "enabled": True,
        "device": "scripted",
        "rate_hz": 20.0,
        "always_intervene": not server,
        "script": {
            "patience_s": patience_s,
            "progress_m": progress_m,
            "release_m": release_m,
            "regress_m": regress_m,
        },
    }
    cfg["recorder"] = {"episodes": {"source": "intervention" if server else "demo"}}
    path = work / ("graph_hg.yaml" if server else "graph_demos.yaml")
    path.write_text(yaml.safe_dump(cfg))
    return path


def collect(graph: Path, out: Path, episodes: int, seed: int, log: Path) -> None:
    run(
        [
            *RLINF,
            "collect",
            str(graph),
            "--episodes",
            str(episodes),
            "--out",
            str(out),
            f"task.seed={seed}",
        ],
        log,
        timeout=120 + 40 * episodes,
    )


def round_stats(store: Path) -> dict:
    """Episodes, steps, intervention ratio and success of one round's episode store."""
    from rlinf_data.store import EpisodeStore

    eps = [
        ep
        for ep in EpisodeStore(store, mode="r")
        if ep.info.status in ("complete", "truncated") and len(ep)
    ]
    steps = sum(len(ep) for ep in eps)
    human = sum(int(ep.steps["intervention"].sum()) for ep in eps)
    return {
        "episodes": len(eps),
        "steps": steps,
        "human_steps": human,
        "intervention_ratio": round(human / max(steps, 1), 3),
        "assisted_success": round(
            float(np.mean([ep.info.success for ep in eps])) if eps else 0.0, 3
        ),
        "solo_success": int(
            sum(ep.info.success and not ep.steps["intervention"].any() for ep in eps)
        ),
        "episodes_with_takeover": int(sum(bool(ep.steps["intervention"].any()) for ep in eps)),
    }


def add_to_dataset(dataset: Path, source: Path, only_intervention: bool) -> int:
    """Append ``source``'s episodes (or only their intervention-labelled steps) to ``dataset``."""
    from rlinf_contracts.episode import Episode
    from rlinf_data.store import EpisodeStore

    out, added = EpisodeStore(dataset), 0
    for ep in EpisodeStore(source, mode="r"):
        if ep.info.status not in ("complete", "truncated") or not len(ep):
            continue
        mask = (
            ep.steps["intervention"].astype(bool) if only_intervention else np.ones(len(ep), bool)
        )
        if not mask.any():
            continue
        steps = {k: v[mask] for k, v in ep.steps.items()}
        out.write(Episode(ep.info, steps))
        added += int(mask.sum())
    return added


def train(
    work: Path, dataset: Path, name: str, updates: int, eval_episodes: int, log: Path
) -> dict:
    """BC (offline runner) on ``dataset``; returns the checkpoint and the held-out sim success."""
    out = work / name
    cfg = {
        "runner": "offline",
        "name": name,
        "seed": 0,
        "env": {
            "name": "mujoco_franka/reach",
            "num_envs": 8,
            "obs_mode": "state",
            "control": "ee_delta",
        },
        "model": {"hidden": [256, 256]},
        "algorithm": {"name": "bc", "batch_size": 256},
        "data": {"demos": str(dataset)},
        "train": {
            "updates": updates,
            "log_every": max(updates // 4, 1),
            "out_dir": str(out),
            "progress": False,
        },
        "eval": {"episodes": eval_episodes, "num_envs": 25},
    }
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    t0 = time.time()
    run([*RLINF, "train", str(path)], log, timeout=1200)
    final = json.loads((out / "metrics.json").read_text())["final"]
    split = next(iter(final["eval"].values()))
    return {
        "checkpoint": final["checkpoint"],
        "heldout_success": round(float(split["success_rate"]), 3),
        "heldout_episodes": eval_episodes,
        "train_s": round(time.time() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--demos", type=int, default=3, help="teleop demonstrations before round 1")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--episodes", type=int, default=5, help="twin episodes per HG-DAgger round")
    ap.add_argument("--updates", type=int, default=2000, help="BC updates per retraining")
    ap.add_argument(
        "--eval-episodes", type=int, default=50, help="held-out simulator episodes per policy"
    )
    ap.add_argument("--patience-s", type=float, default=1.0)
    ap.add_argument("--progress-m", type=float, default=0.02)
    ap.add_argument("--release-m", type=float, default=0.02)
    ap.add_argument(
        "--regress-m", type=float, default=None, help="also take over when this much off the path"
    )
    ap.add_argument("--work", default="runs/hg_dagger")
    ap.add_argument(
        "--report",
        "--from-json",
        action="store_true",
        help="rewrite the .md / .png from the .json, run nothing",
    )
    a = ap.parse_args()
    if a.report:
        return write_results(json.loads((RESULTS / "hg_dagger.json").read_text()))
    os.environ["ROS_DOMAIN_ID"] = str(free_domains()[0])  # apart from other DDS users here
    os.environ["RLINF_WEIGHTS_TOKEN"] = TOKEN
    work = (ROOT / a.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log, dataset, t_start = work / "log.txt", work / "dataset", time.time()
    script = (a.patience_s, a.progress_m, a.release_m, a.regress_m)
    collect(graph_config(work, "", *script), work / "demos", a.demos, 0, log)
    demo = round_stats(work / "demos")
    n_data = add_to_dataset(dataset, work / "demos", only_intervention=False)
    print(f"demos: {demo}, dataset {n_data} steps", flush=True)
    policy = train(work, dataset, "bc_round0", a.updates, a.eval_episodes, log)
    print(f"round 0 policy: {policy}", flush=True)

    from policy_server.push import WeightPusher

    port = free_port()
    server_log = open(work / "server.log", "ab")
    server = subprocess.Popen(
        [*RLINF, "serve", "--checkpoint", policy["checkpoint"], "--port", str(port)],
        cwd=ROOT,
        stdout=server_log,
        stderr=subprocess.STDOUT,
    )
    rows = [
        {
            "round": 0,
            "policy": "none (teleop demos)",
            "heldout_success": None,
            "dataset_steps": n_data,
            **demo,
        }
    ]
    pusher = None
    try:
        url = f"ws://127.0.0.1:{port}"
        graph = graph_config(work, url, *script)
        for _ in range(120):  # the server imports torch and loads the checkpoint
            try:
                pusher = WeightPusher(url, token=TOKEN, timeout_s=30)
                break
            except Exception:
                if server.poll() is not None:
                    raise SystemExit(
                        f"rlinf serve exited {server.returncode}; see {work / 'server.log'}"
                    ) from None
                time.sleep(1.0)
        assert pusher is not None, "policy server did not come up in 120 s"
        for r in range(1, a.rounds + 1):
            t0 = time.time()
            store = work / f"round{r}"
            collect(graph, store, a.episodes, 100 * r, log)
            stats = round_stats(store)
            added = add_to_dataset(dataset, store, only_intervention=True)
            n_data += added
            row = {
                "round": r,
                "policy": f"served (version {r - 1})",
                **policy,
                "dataset_steps": n_data,
                "added_steps": added,
                **stats,
                "collect_s": round(time.time() - t0, 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            policy = train(work, dataset, f"bc_round{r}", a.updates, a.eval_episodes, log)
            ckpt = Path(policy["checkpoint"]) / "model.safetensors"
            ack = pusher.push(ckpt.read_bytes(), version=r)
            print(f"round {r}: retrained ({policy}), pushed version {ack.version}", flush=True)
        rows.append(
            {
                "round": "after",
                "policy": f"final (version {a.rounds}, not run on the twin)",
                **policy,
                "dataset_steps": n_data,
            }
        )
    finally:
        if pusher is not None:
            pusher.close()
        server.terminate()
        server.wait(timeout=20)
        server_log.close()
    result = {
        "command": run_command(),
        "date": now_utc(),
        "machine": {
            "arch": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m": round(os.getloadavg()[0], 1),
        },
        "settings": vars(a),
        "rows": rows,
        "elapsed_s": round(time.time() - t_start, 1),
    }
    write_results(result)


def write_results(result: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hg_dagger.json").write_text(json.dumps(result, indent=2))
    s = result["settings"]
    m = result["machine"]
    lines = [
        "# HG-DAgger rounds against the sim twin (benchmarks/hg_dagger.py)",
        "",
        *(
            f"{line}\n"
            for line in provenance(
                {
                    "command": result.get("command"),
                    "machine": m.get("arch"),
                    "cpus": m.get("cpus"),
                    "date": result.get("date"),
                }
            )
        ),
        "Reach on the MuJoCo twin over ROS 2 (robot node, policy client at 10 Hz, teleop, task "
        "judge, recorder "
        f"as processes). {s['demos']} scripted teleop demos, then {s['rounds']} rounds of "
        f"{s['episodes']} "
        "episodes with the policy served and a scripted human that takes over after "
        f"{s['patience_s']:g} s "
        f"without {s['progress_m']:g} m of progress"
        + (f" or {s['regress_m']:g} m off its closest approach" if s.get("regress_m") else "")
        + f" and hands back within {s['release_m']:g} m of the goal. "
        f"Retraining: BC (offline runner, {s['updates']} updates) on demos + "
        "intervention-labelled steps; "
        f"new weights pushed to the running server. Held-out success: {s['eval_episodes']} "
        "simulator episodes, "
        "no human.",
        "",
        "| round | policy driving | held-out success (sim, no human) | twin episodes | "
        "intervention ratio | "
        "assisted success | finished alone | dataset steps |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        held = "-" if r["heldout_success"] is None else f"{r['heldout_success']:.2f}"
        lines.append(
            f"| {r['round']} | {r['policy']} | {held} | {r.get('episodes', '-')} | "
            f"{r.get('intervention_ratio', '-')} | {r.get('assisted_success', '-')} | "
            f"{r.get('solo_success', '-')} | {r['dataset_steps']} |"
        )
    lines += [
        "",
        "Twin episodes: those with at least one recorded step; episodes the task judge scored a "
        "success "
        "at step 0-1 (hand already within the 5 cm radius) have none and are left out of the "
        "ratios. "
        "Held-out success is over "
        f"{s['eval_episodes']} episodes (standard error up to 0.07). "
        f"Round 0 is the teleop demonstrations (intervention ratio 1 by construction). Total "
        f"{result['elapsed_s']:.0f} s on {result['machine']['cpus']} shared cores, load average "
        f"{result['machine']['load_avg_1m']} at the end.",
    ]
    (RESULTS / "hg_dagger.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        plot(result)
    except Exception as e:
        print(f"plot not written: {e}")


def plot(result: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = [r for r in result["rows"] if isinstance(r["round"], int) and r["round"] > 0]
    served = rounds + [dict(result["rows"][-1], round=len(rounds) + 1)]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(
        [r["round"] for r in served],
        [r["heldout_success"] for r in served],
        "o-",
        label="held-out success of the policy (sim, no human)",
    )
    ax.plot(
        [r["round"] for r in rounds],
        [r["intervention_ratio"] for r in rounds],
        "s--",
        label="intervention ratio (twin)",
    )
    ax.set_xlabel("round")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=8)
    ax.set_title("HG-DAgger on the sim twin (reach)")
    fig.tight_layout()
    fig.savefig(RESULTS / "hg_dagger.png", dpi=110)


if __name__ == "__main__":
    main()
