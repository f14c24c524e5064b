"""ROS control-loop benchmark: observation -> action -> command latency, highest sustained rate,
and a raw rclpy round trip of the same messages measured in the same run.

    .venv/bin/python benchmarks/ros_loop.py [--rates 10 20 30 50] [--seconds 8]

Graph per rate (real processes, real DDS, a random ROS_DOMAIN_ID): sim robot node (MuJoCo Panda,
100 Hz driver) + sim camera node (224x224 rgb8) + policy client node (chunk 1: every control
step needs a fresh inference) + a real policy server serving a scripted policy.

- latency: stamp of the newest message of the synchronised observation -> publication of the
  first command computed from it (policy client's own measurement, p50 / p99);
- sustained: achieved command rate >= 95 % of the target and >= 90 % of the commands are
  policy steps (not holds while waiting for an observation or an answer). A tick with no newer
  synchronised set re-sends the newest one (``reuse_observation``); "fresh obs/s" says how many
  steps per second acted on a new camera frame (the sim camera's render rate bounds it);
- raw: a JointState and a 224x224 rgb8 Image published to an echo process and back (RTT).

Writes benchmarks/results/ros_loop.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from ros_bench_env import prepare

from rlinf_ros.domains import free_domains

ROOT = prepare(fastrtps=True)

from bench_results import RESULTS, now_utc, provenance, run_command  # noqa: E402
from ros_procs import Probe, Procs, free_port  # noqa: E402


def echo_main() -> None:
    """Echo process: republish every ping on the matching pong topic."""
    import rclpy
    from sensor_msgs.msg import Image, JointState

    rclpy.init()
    node = rclpy.create_node("bench_echo")
    for kind, t in (("js", JointState), ("img", Image)):
        pub = node.create_publisher(t, f"bench/pong_{kind}", 10)
        node.create_subscription(t, f"bench/ping_{kind}", pub.publish, 10)
    try:
        rclpy.spin(node)
    except Exception:
        pass


def pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "n": int(len(a)),
    }


def raw_round_trip(procs: Procs, n: int = 200) -> dict[str, dict[str, float]]:
    from sensor_msgs.msg import Image, JointState

    from rlinf_ros.conversions import joint_state_msg, numpy_to_image, stamp_to_sec

    procs.start("echo", [str(Path(__file__).resolve()), "--echo"])
    probe = Probe("bench_raw")
    out = {}
    try:
        img = np.random.default_rng(0).integers(0, 255, (224, 224, 3), dtype=np.uint8)
        for kind, t, make in (
            (
                "joint_state",
                JointState,
                lambda s: joint_state_msg(
                    [f"panda_joint{i}" for i in range(1, 8)],
                    np.zeros(7),
                    np.zeros(7),
                    np.zeros(7),
                    s,
                ),
            ),
            ("image_224_rgb8", Image, lambda s: numpy_to_image(img, "rgb8", s)),
        ):
            short = "js" if kind == "joint_state" else "img"
            rtts = probe.record(
                t, f"bench/pong_{short}", lambda m: time.time() - stamp_to_sec(m.header.stamp)
            )
            pub = probe.node.create_publisher(t, f"bench/ping_{short}", 10)
            deadline = time.time() + 60
            while not rtts and time.time() < deadline:  # discovery
                pub.publish(make(time.time()))
                time.sleep(0.1)
            with probe.lock:
                rtts.clear()
            for _ in range(n):
                pub.publish(make(time.time()))
                time.sleep(0.01)
            time.sleep(0.5)
            with probe.lock:
                out[kind] = pct([r[1] * 1e3 for r in rtts])
    finally:
        probe.close()
        procs.kill("echo")
    return out


def loop_at_rate(tmp: Path, rate: float, seconds: float) -> dict:
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    port = free_port()
    cfg = yaml.safe_load((ROOT / "configs/ros_sim_franka_camera.yaml").read_text())
    cfg["policy_client"].update(
        server_url=f"ws://127.0.0.1:{port}", control_hz=rate, slop_s=0.5 / rate + 0.01
    )
    cfg["cameras"][0]["camera"]["fps"] = min(1.25 * rate, 60)
    path = tmp / f"graph_{rate:g}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    procs = Procs(tmp)
    probe = Probe("bench_loop")
    try:
        procs.start_server(port)
        for kind in ("robot", "camera", "policy_client"):
            procs.start_node(kind, path)
        status = probe.record(String, "policy_client/status", lambda m: json.loads(m.data))
        cmds = probe.record(
            JointTrajectory, "joint_trajectory_controller/joint_trajectory", lambda m: 0
        )
        probe.wait_for(
            lambda: status and status[-1][1]["policy_steps"] >= 20, 120, "loop running", procs
        )
        s0, t0 = status[-1][1], time.time()
        time.sleep(seconds)
        s1, t1 = status[-1][1], time.time()
        with probe.lock:
            n_cmd = sum(1 for t, _ in cmds if t0 <= t <= t1)
        policy = s1["policy_steps"] - s0["policy_steps"]
        reused = s1["reused_obs"] - s0["reused_obs"]
        holds = s1["hold_steps"] - s0["hold_steps"]
        achieved = n_cmd / (t1 - t0)
        frac = policy / max(policy + holds, 1)
        return {
            "target_hz": rate,
            "achieved_hz": round(achieved, 2),
            "policy_fraction": round(frac, 3),
            "fresh_obs_hz": round((policy - reused) / (t1 - t0), 2),
            "sustained": bool(achieved >= 0.95 * rate and frac >= 0.9),
            "obs_to_command_ms": {"p50": s1["command_ms_p50"], "p99": s1["command_ms_p99"]},
            "obs_to_action_ms": {"p50": s1["latency_ms_p50"], "p99": s1["latency_ms_p99"]},
            "infer_ms_p50": s1["infer_ms_p50"],
            "load_avg_1m": round(os.getloadavg()[0], 1),
        }
    finally:
        probe.close()
        procs.stop_all()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--echo", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rates", type=float, nargs="+", default=[5, 10, 20, 30, 40, 50])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument(
        "--from-json", action="store_true", help="only re-render results/ros_loop.md from its JSON"
    )
    a = ap.parse_args()
    if a.from_json:
        return write_results(json.loads((RESULTS / "ros_loop.json").read_text()))
    if a.echo:
        return echo_main()  # inherits the parent's ROS_DOMAIN_ID
    os.environ["ROS_DOMAIN_ID"] = str(free_domains()[0])  # apart from other DDS users here
    tmp = Path(tempfile.mkdtemp(prefix="ros_loop_"))
    raw = raw_round_trip(Procs(tmp))
    print(f"raw rclpy round trip: {json.dumps(raw)}", flush=True)
    loops = []
    for rate in a.rates:
        r = loop_at_rate(tmp, rate, a.seconds)
        print(json.dumps(r), flush=True)
        loops.append(r)
    result = {
        "command": run_command(),
        "date": now_utc(),
        "machine": {
            "arch": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m": os.getloadavg()[0],
        },
        "raw_round_trip_ms": raw,
        "loop": loops,
        "highest_sustained_hz": highest_sustained(loops),
        "notes": "chunk=1 (fresh inference every control step); 224x224 rgb8 sim camera rendered "
        "with osmesa; shared 2-core machine, see load_avg",
    }
    write_results(result)


def highest_sustained(loops: list[dict]) -> float | None:
    """The highest target rate such that it and every lower rate tried were sustained."""
    best = None
    for r in sorted(loops, key=lambda r: r["target_hz"]):
        if not r["sustained"]:
            break
        best = r["target_hz"]
    return best


def write_results(result: dict) -> None:
    raw, loops, best = result["raw_round_trip_ms"], result["loop"], result["highest_sustained_hz"]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ros_loop.json").write_text(json.dumps(result, indent=2))
    lines = [
        "# ROS control loop (benchmarks/ros_loop.py)",
        "",
        *(
            f"{line}\n"
            for line in provenance(
                {
                    "command": result.get("command"),
                    "machine": result["machine"].get("arch"),
                    "cpus": result["machine"]["cpus"],
                    "date": result.get("date"),
                }
            )
        ),
        f"Load average {result['machine']['load_avg_1m']:.1f} (the machine is shared with other "
        "jobs; "
        "figures move with the load).",
        "",
        "Raw rclpy round trip (publish -> echo process -> back), same run:",
        "",
        "| message | p50 ms | p99 ms |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {v['p50']} | {v['p99']} |" for k, v in raw.items()]
    lines += [
        "",
        "Closed loop (robot + camera 224x224 + policy client + policy server, chunk 1):",
        "",
        "| target Hz | achieved Hz | policy steps | fresh obs/s | obs->command p50/p99 ms | "
        "obs->action p50/p99 ms | server infer p50 ms | load avg | sustained |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in loops:
        oc, oa = r["obs_to_command_ms"], r["obs_to_action_ms"]
        lines.append(
            f"| {r['target_hz']:g} | {r['achieved_hz']} | {r['policy_fraction']:.0%} | "
            f"{r['fresh_obs_hz']} | "
            f"{oc['p50']:.1f} / {oc['p99']:.1f} | {oa['p50']:.1f} / {oa['p99']:.1f} | "
            f"{r['infer_ms_p50']:.1f} | {r['load_avg_1m']} | {'yes' if r['sustained'] else 'no'} |"
        )
    lines += [
        "",
        f"Highest sustained control rate (it and every lower rate sustained): {best} Hz"
        if best
        else "No rate sustained.",
    ]
    (RESULTS / "ros_loop.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
