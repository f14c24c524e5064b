"""A fleet of simulated robots into one learner ingest: where it saturates, and which part first.

For each fleet size (1 / 4 / 16 / 64 robots at 20 Hz) three processes, on the cores the
benchmark has (``taskset -c 1 python benchmarks/fleet_ingest.py`` pins all three to one core:
children inherit it):

* **learner**: the real :class:`~rlinf_data.ingest.IngestServer` (event loop + one store
  writer) and a learner thread that does what ``RobotFeed.pull`` does -- feed -> segments ->
  per-robot replay -- and pays ``utd`` updates per transition, each a state-SAC-sized torch
  update (actor + twin critic MLPs [256, 256], batch 128, one thread), owed updates capped as
  ``learner.offpolicy.utd`` caps them;
* **robots**: :class:`~rlinf_ros.fleet.Fleet`, each robot a real streamer client (spool,
  window, acks) replaying a recorded episode store at 20 Hz;
* the parent, which marks the measurement window (after every robot connected) and collects.

Measured per size over the window: offered and stored transitions/s, learner updates/s and
transitions/s (updates/s / utd), backlog at the end (robots' unacknowledged items, items queued
in the ingest, feed queue, owed updates), per-robot fairness (min / max of each robot's stored
share over the mean), CPU per component (ingest event loop, store writer, learner thread, robots'
process) and the store writer's busy share of wall time. After the window the ingest stops and
the store is read back: per robot, every step seq up to its last acknowledged seq must be there
exactly once (lost / duplicated). ``--from-json`` re-renders the markdown.

    .venv/bin/python benchmarks/fleet_ingest.py [--sizes 1 4 16 64] [--seconds 60] [--camera 64]

Writes benchmarks/results/fleet_ingest[_cameraPX][_one_core].json and .md. The reading names the
first part to give out: the learner when it trains on less than is stored, the ingest's writer
(or the robots) when less is stored than the robots put.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_results import keep_run_facts, load, machine_meta, run_command
from fleet_ingest_report import (
    ACTION_DIM,
    BACKLOG_CAP,
    BATCH,
    EPISODE_STEPS,
    EPISODES,
    HZ,
    STATE_DIM,
    UTD,
    derive,
    render,
    stem,
)

TOKEN = "bench-fleet"
TICK = os.sysconf("SC_CLK_TCK")


def step_layout(camera: int) -> Any:
    """The robots' step layout: state and action, plus one ``camera`` px camera when > 0."""
    from rlinf_contracts.episode import StepLayout

    return StepLayout(STATE_DIM, ACTION_DIM, {"front": (camera, camera)} if camera else {})


# -- learner process ------------------------------------------------------------------------------
def _thread_cpu(tid: int) -> float:
    """CPU seconds (user + system) of one thread of this process."""
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class _Learner:
    """Feed -> segments -> per-robot replay -> torch updates at ``UTD`` (RobotFeed's data path)."""

    def __init__(self, srv: Any, camera: int) -> None:
        import numpy as np
        import torch

        from learner.offpolicy.remote import Segments
        from rlinf_data.replay import ReplayBuffer, ReplayConfig

        torch.set_num_threads(1)
        self.np, self.torch, self.srv = np, torch, srv
        layout = step_layout(camera)
        capacity = 20_000 if camera else 200_000  # per robot; frames are 12 KB at 64 px
        self.replay = ReplayBuffer(
            layout, ReplayConfig(capacity=capacity, mix={"online": 1.0}, per_robot=True)
        )
        self.segments = Segments(layout, "fleet/replay", None, HZ)
        nn = torch.nn

        def mlp(i: int, o: int) -> Any:
            return nn.Sequential(
                nn.Linear(i, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, o)
            )

        self.actor = mlp(STATE_DIM, 2 * ACTION_DIM)
        self.critics = nn.ModuleList([mlp(STATE_DIM + ACTION_DIM, 1) for _ in range(2)])
        self.opt_a = torch.optim.Adam(self.actor.parameters(), 3e-4)
        self.opt_c = torch.optim.Adam(self.critics.parameters(), 3e-4)
        self.rng = np.random.default_rng(0)
        self.updates = self.transitions = 0
        self.owed = self.dropped = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="learner", daemon=True)

    def update(self) -> None:
        torch = self.torch
        b = self.replay.sample(BATCH, self.rng)
        obs = torch.as_tensor(b["obs"]["state"])
        nxt = torch.as_tensor(b["next_obs"]["state"])
        act = torch.as_tensor(b["action"])
        with torch.no_grad():
            a2 = torch.tanh(self.actor(nxt)[:, :ACTION_DIM])
            q2 = torch.min(*[c(torch.cat([nxt, a2], 1)) for c in self.critics]).squeeze(1)
            target = torch.as_tensor(b["reward"]) + torch.as_tensor(b["discount"]) * q2
        q = [c(torch.cat([obs, act], 1)).squeeze(1) for c in self.critics]
        loss_c = sum(((qi - target) ** 2).mean() for qi in q)
        self.opt_c.zero_grad()
        loss_c.backward()  # type: ignore[union-attr]  # the critic output is a tensor here
        self.opt_c.step()
        a = torch.tanh(self.actor(obs)[:, :ACTION_DIM])
        loss_a = -self.critics[0](torch.cat([obs, a], 1)).mean()
        self.opt_a.zero_grad()
        loss_a.backward()
        self.opt_a.step()
        self.updates += 1

    def drain(self) -> None:
        feed = self.srv.feed
        for _ in range(feed.qsize()):
            try:
                t = feed.get_nowait()
            except queue.Empty:  # in flight from an ingest process: next time (as RobotFeed)
                break
            for ep in self.segments.add(t):
                self.replay.add_episode(ep, "online")
                self.transitions += len(ep)
                self.owed += UTD * len(ep)
        if self.owed > BACKLOG_CAP:
            self.dropped += self.owed - BACKLOG_CAP
            self.owed = float(BACKLOG_CAP)

    def run(self) -> None:
        self.tid = threading.get_native_id()
        while not self.stop.is_set():
            self.drain()
            if self.owed >= 1 and len(self.replay) >= BATCH:
                self.update()
                self.owed -= 1
            else:
                time.sleep(0.005)


def learner_main(store: str, camera: int, ingest: str) -> None:
    """Serve the ingest, learn; on stdin ``mark`` / ``end``: counters; then read the store.
    ``ingest``: ``thread`` embeds it in this process (as ``RobotFeed`` does by default),
    ``process`` runs it in a child (``ingest.process: true``)."""
    import logging

    from rlinf_data.ingest import IngestConfig, IngestServer
    from rlinf_data.ingest_process import IngestProcess
    from rlinf_data.store import EpisodeStore

    logging.basicConfig(level="WARNING")
    cfg, layout = IngestConfig(store=store, port=0, token=TOKEN), step_layout(camera)
    busy = [0.0]
    if ingest == "process":
        srv: Any = IngestProcess(cfg, layout=layout).start()
    else:
        srv = IngestServer(cfg, layout=layout)
        apply = srv.ledger.apply

        def timed(robot: str, items: list) -> Any:
            t0 = time.perf_counter()
            try:
                return apply(robot, items)
            finally:
                busy[0] += time.perf_counter() - t0

        srv.ledger.apply = timed  # type: ignore[method-assign]  # the writer's busy wall time
        srv.start()
    learner = _Learner(srv, camera)
    learner.thread.start()
    while not hasattr(learner, "tid"):
        time.sleep(0.01)
    learner_tid, main_tid = learner.tid, threading.get_native_id()
    print(json.dumps({"url": srv.url}), flush=True)

    def snap() -> dict[str, Any]:
        # the ingest is every thread but the learner's and the idle main one: its event loop,
        # the store writer and the threads zarr does its I/O on
        cpu = {"ingest": 0.0, "store_writer": 0.0, "learner": 0.0}
        writers = {t.native_id for t in threading.enumerate() if t.name.startswith("ingest-store")}
        for task in Path("/proc/self/task").iterdir():
            tid = int(task.name)
            try:
                used = _thread_cpu(tid)
            except OSError:  # the thread ended meanwhile
                continue
            if tid == learner_tid:
                cpu["learner"] += used
            elif tid != main_tid:
                cpu["ingest"] += used
                if tid in writers:
                    cpu["store_writer"] += used
        status = srv.status()
        if ingest == "process":  # the child's whole CPU (sent every 0.5 s); no writer timing
            cpu["ingest"] = status["cpu_s"]
        return {
            "t": time.monotonic(),
            "cpu": cpu,
            "process_cpu": sum(os.times()[:2]),
            "writer_busy": busy[0],
            "stored": status["ledger"]["stored"],
            "per_robot": {k: v["stored"] for k, v in status["per_robot"].items()},
            "updates": learner.updates,
            "transitions": learner.transitions,
        }

    marks = {}
    for line in sys.stdin:
        cmd = line.strip()
        if cmd in ("mark", "end"):
            marks[cmd] = snap()
        if cmd == "end":
            break
    end = marks["end"]
    status = srv.status()
    end.update(
        queued=sum(status["queued"].values()),
        feed=srv.feed.qsize(),
        owed=learner.owed,
        dropped_updates=learner.dropped,
        dropped_feed=status["dropped_feed"],
        segments_pending=learner.segments.pending(),
    )
    learner.stop.set()
    learner.thread.join(10)
    srv.stop()  # the robots have stopped: the last seqs are final
    last = {k: v["last_seq"] for k, v in srv.status()["per_robot"].items()}
    end["check"] = _check_store(EpisodeStore(store, mode="r"), last)
    end["last_seq"] = last
    print(json.dumps(marks), flush=True)


def _check_store(store: Any, last: dict[str, int]) -> dict[str, dict[str, int]]:
    """Per robot: step seqs up to its last acknowledged seq missing from the store (lost) and
    stored more than once (duplicated). A robot's items are episodes of ``EPISODE_STEPS`` steps
    plus one end item, so item ``s`` is a step unless ``s % (EPISODE_STEPS + 1)`` is the end."""
    seqs: dict[str, list[int]] = {}
    for i in range(len(store)):
        info = store.info(i)
        robot = info.extra.get("robot_id")
        if robot is not None:
            s0 = int(info.extra["seq0"])
            seqs.setdefault(robot, []).extend(range(s0, s0 + store.length(i)))
    out = {}
    per = EPISODE_STEPS + 1
    for robot, upto in last.items():
        got = seqs.get(robot, [])
        want = {s for s in range(upto + 1) if s % per != EPISODE_STEPS}
        have = set(got)
        out[robot] = {
            "lost": len(want - have),
            "duplicated": len(got) - len(have),
            "steps": len(have),
        }
    return out


# -- robots process -------------------------------------------------------------------------------
def robots_main(url: str, robots: int, seconds: float, recorded: str, spool: str) -> None:
    """Run the fleet; print ``started`` once all are connected, then the status at the end."""
    from rlinf_contracts.wire import packb
    from rlinf_ros.fleet import Fleet, FleetConfig, episode_items
    from rlinf_ros.streaming import StreamerConfig

    stream = StreamerConfig(url=url, window=64, batch=16, backoff_s=0.2, backoff_max_s=2.0)
    cfg = FleetConfig(robots=robots, hz=HZ, items=10**9, spool_root=spool, stream=stream)
    fleet = Fleet.from_store(cfg, recorded, token=TOKEN)
    gen = episode_items(fleet.episodes)
    sizes = [len(packb(next(gen).to_wire())) for _ in range(EPISODE_STEPS + 1)]
    t_cpu = sum(os.times()[:2])
    ok = fleet.connect(120.0)
    fleet.start()
    t0 = time.monotonic()
    print(json.dumps({"started": ok}), flush=True)
    cpu0 = sum(os.times()[:2])
    time.sleep(seconds)
    wall = time.monotonic() - t0
    status = fleet.status()
    out = {
        "wall": wall,
        "cpu": sum(os.times()[:2]) - cpu0,
        "setup_cpu": cpu0 - t_cpu,
        "put": sum(r.sent for r in fleet.robots),
        "late_ticks": fleet.late_ticks,
        "backlog": sum(s["backlog"] for s in status),
        "acked": {s["robot_id"]: s["acked"] for s in status},
        "bytes_per_item": sum(sizes) / len(sizes),
        "failures": sum(s["failures"] for s in status),
    }
    print(json.dumps(out), flush=True)
    fleet.stop()


# -- parent ---------------------------------------------------------------------------------------
def one_size(
    n: int, seconds: float, tmp: Path, recorded: Path, camera: int, ingest: str
) -> dict[str, Any]:
    here = [sys.executable, __file__]
    store, spool = tmp / f"learner-{n}", tmp / f"spool-{n}"
    load0 = os.getloadavg()[0]
    lp = subprocess.Popen(
        [*here, "--role", "learner", "--store", str(store), "--camera", str(camera)]
        + ["--ingest", ingest],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert lp.stdin is not None and lp.stdout is not None
    url = json.loads(lp.stdout.readline())["url"]
    rp = subprocess.Popen(
        [
            *here,
            "--role",
            "robots",
            "--url",
            url,
            "--robots",
            str(n),
            "--seconds",
            str(seconds),
            "--recorded",
            str(recorded),
            "--spool",
            str(spool),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert rp.stdout is not None
    started = json.loads(rp.stdout.readline())["started"]
    lp.stdin.write("mark\n")
    lp.stdin.flush()
    robots = json.loads(rp.stdout.readline())
    lp.stdin.write("end\n")
    lp.stdin.flush()
    marks = json.loads(lp.stdout.readline())
    rp.wait(60)
    lp.wait(120)
    row = summarize(n, seconds, started, robots, marks, load0, os.getloadavg()[0])
    return derive({**row, "ingest": ingest})


def summarize(
    n: int, seconds: float, started: bool, robots: dict, marks: dict, load0: float, load1: float
) -> dict[str, Any]:
    a, b = marks["mark"], marks["end"]
    wall = b["t"] - a["t"]
    stored = b["stored"] - a["stored"]
    per = {r: b["per_robot"].get(r, 0) - a["per_robot"].get(r, 0) for r in b["per_robot"]}
    mean = sum(per.values()) / max(1, n)
    cpu = {k: (b["cpu"][k] - a["cpu"][k]) / wall for k in b["cpu"]}
    check = b["check"]
    # a robot never holds an ack for more than the ingest stored
    acked_ok = all(v <= b["last_seq"].get(r, -1) for r, v in robots["acked"].items())
    steps_share = EPISODE_STEPS / (EPISODE_STEPS + 1)
    ingest_cpu = cpu["ingest"]
    offered = n * HZ * steps_share
    row = {
        "robots": n,
        "connected": started,
        "seconds": round(wall, 1),
        "offered_tps": round(offered, 1),
        "put_tps": round(robots["put"] * steps_share / robots["wall"], 1),
        "stored_tps": round(stored / wall, 1),
        "learner_ups": round((b["updates"] - a["updates"]) / wall, 1),
        "learner_tps": round((b["updates"] - a["updates"]) / wall / UTD, 1),
        "replay_tps": round((b["transitions"] - a["transitions"]) / wall, 1),
        "backlog_robots": robots["backlog"],
        "backlog_ingest": b["queued"] + b["feed"] + b["segments_pending"],
        "owed_updates": round(b["owed"], 1),
        "dropped_updates": round(b["dropped_updates"], 1),
        "dropped_feed": b["dropped_feed"],
        "lost": sum(c["lost"] for c in check.values()),
        "duplicated": sum(c["duplicated"] for c in check.values()),
        "fair_min": round(min(per.values()) / mean, 3) if mean else 0.0,
        "fair_max": round(max(per.values()) / mean, 3) if mean else 0.0,
        "cpu_ingest": round(cpu["ingest"], 3),
        "cpu_store_writer": round(cpu["store_writer"], 3),
        "writer_busy": round((b["writer_busy"] - a["writer_busy"]) / wall, 3),
        "cpu_learner": round(cpu["learner"], 3),
        "cpu_learner_process": round((b["process_cpu"] - a["process_cpu"]) / wall, 3),
        "cpu_robots": round(robots["cpu"] / robots["wall"], 3),
        "robots_late_ticks": robots["late_ticks"],
        "bytes_per_item": round(robots["bytes_per_item"]),
        "ingest_mb_s": round(stored / wall * robots["bytes_per_item"] / 2**20, 3),
        "ingest_cpu_ms_per_tr": round(1000 * ingest_cpu * wall / max(1, stored), 3),
        "writer_ms_per_tr": round(1000 * (b["writer_busy"] - a["writer_busy"]) / max(1, stored), 3),
        "load_start": round(load0, 2),
        "load_end": round(load1, 2),
        "acked_ok": acked_ok,
    }
    return derive(row)


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--role", choices=("parent", "learner", "robots"), default="parent")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--store", default="")
    p.add_argument("--url", default="")
    p.add_argument("--robots", type=int, default=1)
    p.add_argument("--recorded", default="")
    p.add_argument("--spool", default="")
    p.add_argument("--placement", default="")
    p.add_argument(
        "--store-root",
        default="",
        help="directory the learner's store and the robots' spools go under (default: the "
        "system temp dir; /dev/shm takes the disk out of the store writer's cost)",
    )
    p.add_argument(
        "--ingest",
        choices=("thread", "process"),
        default="thread",
        help="thread: the ingest embedded in the learner's process (the default of a run); "
        "process: in a process of its own (ingest.process: true); writes fleet_ingest_process",
    )
    p.add_argument(
        "--camera",
        type=int,
        default=0,
        help="px of one camera in every step (0: state only); writes fleet_ingest_cameraPX",
    )
    p.add_argument("--from-json", action="store_true")
    a = p.parse_args()
    if a.role == "learner":
        learner_main(a.store, a.camera, a.ingest)
        return 0
    if a.role == "robots":
        robots_main(a.url, a.robots, a.seconds, a.recorded, a.spool)
        return 0
    cores = sorted(os.sched_getaffinity(0))
    if a.from_json:
        data = load(stem(a.camera, len(cores) == 1, a.ingest == "process"))
        meta = keep_run_facts(dict(data["meta"]), data["meta"])
        render(meta, [derive(r) for r in data["rows"]])
        return 0
    from rlinf_ros.fleet import synthetic_store

    placement = a.placement or (
        f"everything (ingest, learner, robots) on core(s) {cores} of {os.cpu_count()}"
    )
    load_start = round(os.getloadavg()[0], 2)
    rows = []
    with tempfile.TemporaryDirectory(prefix="fleet-bench-", dir=a.store_root or None) as tmp:
        recorded = synthetic_store(
            Path(tmp) / "recorded", EPISODES, EPISODE_STEPS, step_layout(a.camera)
        )
        for n in a.sizes:
            row = one_size(n, a.seconds, Path(tmp), recorded, a.camera, a.ingest)
            print(json.dumps(row), flush=True)
            rows.append(row)
    pinned = len(cores) < (os.cpu_count() or 1)
    command = ("taskset -c " + ",".join(map(str, cores)) + " " if pinned else "") + run_command()
    meta = machine_meta(
        command=command,  # the pinning is part of how it ran
        seconds=a.seconds,
        camera=a.camera,
        ingest=a.ingest,
        cores=cores,
        placement=placement,
        store_root=a.store_root or tempfile.gettempdir(),
        load_start=load_start,
        load_end=round(os.getloadavg()[0], 2),
    )
    render(meta, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
