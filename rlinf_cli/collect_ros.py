"""``rlinf collect GRAPH.yaml --episodes N --out DIR``: demonstrations / HG-DAgger rounds over ROS 2.

    rlinf collect configs/ros_collect_teleop.yaml --episodes 20 --out runs/demos/reach

The graph YAML names the robot (or the sim twin), the policy client (``server_url: ''`` for
teleop only; a server for policy + human, HG-DAgger), the teleop node and usually a task node
or teleop keys that judge episodes. This command adds the recorder (``recorder.enabled=true``,
``recorder.store=DIR``), starts every node as a process (``rlinf_ros.graph``), shows a live bar
(episodes, success rate, intervention ratio, read from the recorder's status file) and stops
the graph once ``--episodes`` episodes were kept (re-recorded ones do not count). Registered in
``rlinf_cli/collect.py``: a positional argument ending in ``.yaml`` selects this source.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)


def run_ros(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from rlinf_ros.config import load_graph_config
    from rlinf_ros.graph import Graph, graph_env, node_commands

    out = Path(args.out).resolve()
    status_path = out.parent / f".{out.name}.collect.json"
    status_path.unlink(missing_ok=True)
    overrides = [*args.options, "recorder.enabled=true", f"recorder.store={out}", f"recorder.status_path={status_path}"]
    cfg = load_graph_config(args.env, overrides)
    if cfg.task.enabled:
        overrides.append(f"task.episodes={args.episodes + 1}")  # the last one may still be running when we stop
    graph = Graph(node_commands(cfg, args.env, overrides)).start(graph_env(cfg))
    bar = tqdm(total=args.episodes, unit="ep", desc=f"collect {Path(args.env).name}")
    stop, rc = threading.Event(), 0
    try:
        rc = _watch(graph, status_path, args.episodes, bar, stop, getattr(args, "timeout_s", None))
    except KeyboardInterrupt:
        log.warning("interrupted: stopping the graph (recorded episodes are kept)")
        rc = 130
    finally:
        bar.close()
        graph.stop()
    return rc


def _watch(graph: "object", status_path: Path, episodes: int, bar: "object", stop: threading.Event,
           timeout_s: float | None) -> int:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not stop.is_set():
        dead = graph.poll()  # type: ignore[attr-defined]
        if dead is not None:
            log.error("node %s exited with code %s; stopping (see its log above)", dead.name, dead.proc.returncode)
            return 1
        status = _read(status_path)
        kept = status.get("episodes", 0) - status.get("aborted", 0) - (1 if status.get("open") else 0)
        kept = max(0, min(kept, episodes))
        bar.n = kept  # type: ignore[attr-defined]
        rate, ratio = status.get("success_rate"), status.get("intervention_ratio")
        bar.set_postfix(success=f"{rate:.2f}" if rate is not None else "-",  # type: ignore[attr-defined]
                        intervention=f"{ratio:.2f}" if ratio is not None else "-", steps=status.get("steps", 0))
        if kept >= episodes:
            return 0
        if deadline is not None and time.monotonic() > deadline:
            log.error("only %d of %d episodes within %.0f s", kept, episodes, timeout_s)
            return 1
        stop.wait(0.5)
    return 0


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
