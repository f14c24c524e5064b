"""``rlinf collect GRAPH.yaml --episodes N --out DIR``: demonstrations / HG-DAgger over ROS 2.

    rlinf collect configs/ros_collect_teleop.yaml --episodes 20 --out runs/demos/reach

The graph YAML names the robot (or the sim twin), the policy client (``server_url: ''`` for
teleop only; a server for policy + human, HG-DAgger), the teleop node and usually a task node
or teleop keys that judge episodes. This command adds the recorder (``recorder.enabled=true``,
``recorder.store=DIR``), starts every node as a process (``rlinf_ros.graph``), shows a live bar
(episodes, success rate, intervention ratio, read from the recorder's status file) and stops
the graph once ``--episodes`` episodes were kept (re-recorded ones do not count; with
``--only-success`` only successful ones count, at most ``--max-attempts`` episodes, default 5x).
Once the graph has stopped, the episodes this run recorded that were interrupted (the one in
flight at the stop) are discarded, and with ``--only-success`` the failed ones too; the last
log line counts what was kept and discarded, and without ``--only-success`` a warning names the
failed episodes kept as demonstrations (they teach the failure too) and the flag that keeps only
successes. One count: the bar (kept, ``failed``, ``aborted``) reads the episodes the recorder
wrote with their success flag (its status file), the summary reads the same episodes in the
store, and the task node only logs its verdicts; re-recorded (aborted) episodes are counted as
aborted, never as demonstrations. Registered in ``rlinf_cli/collect.py``: a
positional argument ending in ``.yaml`` selects this source.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tqdm import tqdm

    from rlinf_ros.graph import Graph

log = logging.getLogger(__name__)


@dataclass
class Counts:
    """What one collection left in the store (episodes it recorded; earlier ones are untouched)."""

    kept: int = 0
    successes: int = 0
    failed_discarded: int = 0
    interrupted_discarded: int = 0
    aborted: int = 0  # re-recorded: the recorder never wrote them (its status file counts them)

    @property
    def failed_kept(self) -> int:
        return self.kept - self.successes

    def describe(self, out: Path) -> str:
        return (
            f"{self.kept} episodes kept in {out} ({self.successes} successful); discarded "
            f"{self.failed_discarded} failed, {self.interrupted_discarded} interrupted; "
            f"{self.aborted} aborted (re-recorded, never kept)"
        )


def failures_warning(kept: int, successes: int, only_success: bool) -> str | None:
    """One line when failed episodes were kept as demonstrations (a demo store teaches what it
    holds, failures too), with the fix; ``None`` when every kept episode succeeded."""
    failed = kept - successes
    if only_success or failed <= 0:
        return None
    return (
        f"{failed} of {kept} kept episodes failed and are in the store as demonstrations; "
        "collect with --only-success (and --max-attempts N) to keep only successful ones "
        "(near misses for a success classifier's data.extra_stores: keep them)"
    )


def run_ros(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from rlinf_cli.preflight import check_streamer_token
    from rlinf_ros.config import load_graph_config
    from rlinf_ros.graph import Graph, graph_env, node_commands

    out = Path(args.out).resolve()
    only_success = bool(getattr(args, "only_success", False))
    budget = getattr(args, "max_attempts", None) or (
        5 * args.episodes if only_success else args.episodes
    )
    status_path = out.parent / f".{out.name}.collect.json"
    status_path.unlink(missing_ok=True)
    first = _next_index(out)
    overrides = [
        *args.options,
        "recorder.enabled=true",
        f"recorder.store={out}",
        f"recorder.status_path={status_path}",
    ]
    cfg = load_graph_config(args.env, overrides)
    check_streamer_token(cfg)
    if cfg.task.enabled:
        overrides.append(
            f"task.episodes={budget + 1}"
        )  # the last one may still be running when we stop
    graph = Graph(node_commands(cfg, args.env, overrides)).start(graph_env(cfg))
    bar = tqdm(total=args.episodes, unit="ep", desc=f"collect {Path(args.env).name}")
    stop, rc = threading.Event(), 0
    try:
        rc = _watch(
            graph,
            status_path,
            args.episodes,
            bar,
            stop,
            getattr(args, "timeout_s", None),
            only_success,
            budget,
        )
    except KeyboardInterrupt:
        log.warning("interrupted: stopping the graph (recorded episodes are kept)")
        rc = 130
    finally:
        bar.close()
        graph.stop()
    counts = settle(out, first, only_success)
    counts.aborted = int(_read(status_path).get("aborted", 0))  # the recorder's final count
    log.info("collect: %s", counts.describe(out))
    warning = failures_warning(counts.kept, counts.successes, only_success)
    if warning:
        log.warning("collect: %s", warning)
    if rc == 0 and counts.kept < args.episodes:
        log.error("only %d of %d episodes were kept in the store", counts.kept, args.episodes)
        rc = 1
    return rc


def _next_index(out: Path) -> int:
    """Index of the next episode of the store at ``out`` (it names them ``episodes/<index>``)."""
    names = [int(n) for n in _episode_names(out)]
    return max(names) + 1 if names else 0


def _episode_names(out: Path) -> list[str]:
    try:
        return sorted((n for n in os.listdir(out / "episodes") if n.isdigit()), key=int)
    except FileNotFoundError:
        return []


def settle(out: Path, first: int, only_success: bool) -> Counts:
    """After the graph stopped: discard the episodes of this collection (index >= ``first``) that
    were interrupted (still open, or aborted, when the recorder stopped) and, with
    ``only_success``, those that failed; count what is kept."""
    from rlinf_data.store import EpisodeStore

    counts = Counts()
    if not (out / "episodes").is_dir():
        return counts
    store = EpisodeStore(out, mode="a")
    ours = [(pos, int(name)) for pos, name in enumerate(_episode_names(out)) if int(name) >= first]
    # from the newest: a discard does not move the positions before it
    for pos, index in reversed(ours):
        info = store.info(pos)
        if info.status in ("open", "aborted"):
            store.discard(index)
            counts.interrupted_discarded += 1
        elif only_success and not info.success:
            store.discard(index)
            counts.failed_discarded += 1
        else:
            counts.kept += 1
            counts.successes += int(bool(info.success))
    return counts


def _watch(
    graph: Graph,
    status_path: Path,
    episodes: int,
    bar: tqdm,
    stop: threading.Event,
    timeout_s: float | None,
    only_success: bool = False,
    budget: int | None = None,
) -> int:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not stop.is_set():
        dead = graph.poll()
        if dead is not None:
            log.error(
                "node %s exited with code %s; stopping (see its log above)",
                dead.name,
                dead.proc.returncode if dead.proc is not None else None,
            )
            return 1
        status = _read(status_path)
        # the recorder's written episodes, each with its success flag (rlinf_ros.nodes.recorder)
        done, successes = status.get("written", 0), status.get("successes", 0)
        kept = max(0, min(successes if only_success else done, episodes))
        bar.n = kept
        rate, ratio = status.get("success_rate"), status.get("intervention_ratio")
        bar.set_postfix(
            success=f"{rate:.2f}" if rate is not None else "-",
            failed=status.get("failures", 0),
            aborted=status.get("aborted", 0),
            intervention=f"{ratio:.2f}" if ratio is not None else "-",
            steps=status.get("steps", 0),
        )
        if kept >= episodes:
            return 0
        if only_success and budget is not None and done >= budget:
            log.error(
                "only %d of %d successful episodes within %d attempts; raise --max-attempts",
                kept,
                episodes,
                budget,
            )
            return 1
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
