"""Start a node graph as plain processes: what ``rlinf ros up`` does where ``launch_ros`` is absent.

Why processes and not one process with many nodes: the same isolation as ``ros2 launch`` (a
crashing camera does not take the arm driver down; each node has its own GIL), the same
command lines the launch files use (``python -m rlinf_ros.nodes.<kind> --config X --name N``),
and the same YAML.

Supervision policy: nodes start in config order (robot, cameras, policy client); if one exits
unexpectedly the graph stops the others (the robot node holds position on SIGTERM) and
``up`` returns non-zero, so a supervisor (systemd, docker) can restart the whole graph.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlinf_ros.config import RosGraphConfig, load_graph_config
from rlinf_ros.secrets import reject_secret_overrides

log = logging.getLogger(__name__)


@dataclass
class NodeProcess:
    name: str
    kind: str
    argv: list[str]
    proc: subprocess.Popen | None = None


def node_commands(
    cfg: RosGraphConfig,
    config_path: str | Path,
    overrides: list[str] | None = None,
    only: list[str] | None = None,
) -> list[NodeProcess]:
    """The command line of every node in the graph (``only``: subset by node name). Secrets never
    travel on it (``ps`` shows argv to every user): nodes read them from the files / environment
    variables the YAML names, and :func:`graph_env` hands the environment down."""
    reject_secret_overrides(overrides)
    nodes = cfg.node_names()
    unknown = sorted(set(only or []) - set(nodes))
    if unknown:
        raise ValueError(
            f"--only names {unknown} are not nodes of this graph; nodes: {list(nodes)}"
        )
    out = []
    for name, kind in nodes.items():
        if only and name not in only:
            continue
        argv = [
            sys.executable,
            "-m",
            f"rlinf_ros.nodes.{kind}",
            "--config",
            str(config_path),
            "--name",
            name,
            *(overrides or []),
        ]
        out.append(NodeProcess(name, kind, argv))
    return out


def node_config(cfg: RosGraphConfig, name: str, kind: str) -> Any:
    """The config section a node reads: the graph field named after its kind (``robot``,
    ``policy_client``...), or for a camera the ``cameras`` entry with its name."""
    if kind == "camera":
        found = [c for c in cfg.cameras if c.name == name]
        if not found:
            raise ValueError(
                f"no camera named {name!r} in the config; cameras: {[c.name for c in cfg.cameras]}"
            )
        return found[0]
    if not hasattr(cfg, kind):
        raise ValueError(
            f"node {name!r}: kind {kind!r} has no config section; sections: "
            f"{sorted(cfg.node_names())}"
        )
    return getattr(cfg, kind)


def graph_env(cfg: RosGraphConfig) -> dict[str, str]:
    """Each node's environment: ours (with the secrets' variables, e.g. ``RLINF_API_KEY``) plus the
    graph's domain id and RMW."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if cfg.domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(cfg.domain_id)
    env.setdefault("RMW_IMPLEMENTATION", cfg.rmw)
    return env


@dataclass
class Graph:
    """Running processes of one graph."""

    nodes: list[NodeProcess]
    stopping: threading.Event = field(default_factory=threading.Event)

    def start(self, env: dict[str, str]) -> Graph:
        for n in self.nodes:
            log.info("starting %s: %s", n.name, " ".join(n.argv[1:]))
            n.proc = subprocess.Popen(n.argv, env=env)
        return self

    def poll(self) -> NodeProcess | None:
        """The first node that has exited, if any."""
        return next(
            (n for n in self.nodes if n.proc is not None and n.proc.poll() is not None), None
        )

    def stop(self, timeout: float = 10.0) -> dict[str, int | None]:
        """SIGTERM all (reverse start order: policy client first, robot last), then SIGKILL
        stragglers."""
        self.stopping.set()
        for n in reversed(self.nodes):
            if n.proc is not None and n.proc.poll() is None:
                n.proc.terminate()
        codes: dict[str, int | None] = {}
        deadline = time.monotonic() + timeout
        for n in reversed(self.nodes):
            if n.proc is None:
                continue
            try:
                codes[n.name] = n.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0f s; killing it", n.name, timeout)
                n.proc.kill()
                codes[n.name] = n.proc.wait(timeout=5)
        return codes


def _task_results(cfg: RosGraphConfig, only: list[str] | None) -> Path | None:
    """The file whose writing ends a finite task run (``task.episodes`` > 0 with a
    ``task.results_path``): the task node writes it once, after its last episode, so ``up``
    returns 0 then instead of idling until Ctrl-C. ``None``: run until stopped."""
    t = cfg.task
    if not (t.enabled and t.episodes and t.results_path) or (only and t.name not in only):
        return None
    return Path(t.results_path)


def up(
    config_path: str | Path,
    overrides: list[str] | None = None,
    only: list[str] | None = None,
    duration_s: float | None = None,
) -> int:
    """Start the graph and supervise it until SIGINT/SIGTERM, ``duration_s``, a node dies (returns
    1), or a finite task has written its results (returns 0)."""
    cfg = load_graph_config(config_path, overrides)
    graph = Graph(node_commands(cfg, config_path, overrides, only))
    if not graph.nodes:
        log.error("config %s defines no nodes (robot / cameras / policy_client)", config_path)
        return 2
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.time()
    graph.start(graph_env(cfg))
    rc = 0
    t_end = None if duration_s is None else time.monotonic() + duration_s
    results = _task_results(cfg, only)
    try:
        while not stop.is_set() and (t_end is None or time.monotonic() < t_end):
            dead = graph.poll()
            if dead is not None:
                log.error(
                    "node %s exited with code %s; stopping the graph",
                    dead.name,
                    dead.proc.returncode if dead.proc is not None else None,
                )
                rc = 1
                break
            if results is not None and results.is_file() and results.stat().st_mtime >= started:
                log.info(
                    "task done (%d episodes, results in %s); stopping the graph",
                    cfg.task.episodes,
                    results,
                )
                break
            stop.wait(0.2)
    finally:
        codes = graph.stop()
        for s, h in previous.items():
            signal.signal(s, h)
    log.info("graph stopped: %s", codes)
    return rc
