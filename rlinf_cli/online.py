"""``rlinf online GRAPH.yaml LEARNER.yaml``: online RL on a robot, one command per machine.

    rlinf online configs/ros_sim_franka_push.yaml configs/ros_online_rlpd_push.yaml \\
        --teleop scripted                                     # the twin, or a robot PC with a GPU
    rlinf online GRAPH LEARNER --role learner --peer ROBOT_PC # GPU box: learner + policy server
    rlinf online GRAPH LEARNER --role robot --peer GPU_BOX    # robot PC: demos + robot graph

Starts, in order, the real ``rlinf`` commands as child processes (plan: ``rlinf_cli.online_plan``):
``rlinf collect`` when the learner's ``train.demos`` holds fewer than ``--demos`` successful
episodes (successful ones only), ``rlinf train`` (learner + ingest), ``rlinf serve`` once the
learner has written its ``initial`` actor, and ``rlinf ros up`` with the streamer on. Ports are
picked (one machine) or taken from the learner config (a bench) and passed to every piece; the
ingest and weights tokens are files in the per-user secrets directory (``rlinf_cli.secret_files``),
made on first use and handed to the children as ``*_FILE`` variables. One line per stage; each
child's log is in ``<train.out_dir>/logs/``. Ctrl-C (or SIGTERM) stops everything in reverse:
the robot graph first (its streamer reports the steps it could not send), then the server, then
the learner (it writes its final checkpoint). When the learner ends by itself (its budget), the
rest is stopped the same way; a child that ends early is reported with the error line of its
log (``rlinf_cli.online_logs``). Every refusal (``rlinf_cli.online_checks``: ``train.out_dir``
holding a run, an unknown ``--teleop`` device, a stage config its child would refuse (a mistyped
``STAGE:`` key), a busy port, an unusable token, missing demos on a GPU box) comes before the
first child starts; ``--dry-run`` runs the same checks, prints the commands and exits, writing
nothing (a token file it would make is named, not made).
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlinf_cli.online_logs import child_error, log_size
from rlinf_cli.online_plan import ROLES, Plan, Request, Stage, plan, split_overrides
from rlinf_cli.proc_group import Child, ProcessGroup

log = logging.getLogger(__name__)
# the streamer node's last line (``rlinf_ros.nodes.streamer``): what a stop left unsent
BACKLOG_LINE = re.compile(r"streamer: stopped with (\d+) steps unsent \(([\d.]+) MB\) in (\S+)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "online",
        help="online RL on a robot in one command: demos, learner, policy server, robot graph",
    )
    p.add_argument("graph", help="robot graph YAML, e.g. configs/ros_sim_franka_push.yaml")
    p.add_argument("learner", help="learner YAML, e.g. configs/ros_online_rlpd_push.yaml")
    p.add_argument(
        "overrides",
        nargs="*",
        help="STAGE:key=value, STAGE one of collect, learner, server, graph, robot (collect "
        "and graph) "
        "(e.g. learner:train.time_budget_s=600)",
    )
    p.add_argument(
        "--role",
        choices=list(ROLES),
        default="all",
        help="all: everything here; learner: learner + policy server (GPU box); robot: demos + "
        "robot graph (robot PC)",
    )
    p.add_argument(
        "--peer", default=None, help="the other machine's address (--role robot|learner)"
    )
    p.add_argument(
        "--demos", type=int, default=20, help="successful demos wanted in train.demos (default 20)"
    )
    p.add_argument(
        "--teleop",
        default="keyboard",
        help="teleop device for the demos: keyboard | spacemouse | gamepad | leader | scripted",
    )
    p.add_argument(
        "--max-attempts",
        type=int,
        default=0,
        help="demo episodes tried at most for the missing successful ones (default 5x)",
    )
    p.add_argument("--resume", action="store_true", help="continue the run in train.out_dir")
    p.add_argument(
        "--new-run",
        action="store_true",
        help="train.out_dir holds a run: start a fresh one in <out_dir>-YYYYmmdd-HHMMSS",
    )
    p.add_argument("--ingest-port", type=int, default=None, help="default: ingest.port (bench)")
    p.add_argument("--server-port", type=int, default=None, help="default: push.url's (bench)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="run every check a start runs (out_dir, ports, tokens, demos), print the commands, "
        "exit; starts and writes nothing",
    )
    p.add_argument(
        "--learner-stop-timeout",
        type=float,
        default=600.0,
        help="s the learner may take after Ctrl-C (final checkpoint, final eval) before a kill",
    )
    p.set_defaults(run=run)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def count_successes(store: Path) -> int:
    """Successful, complete episodes in the episode store at ``store`` (0 when there is none)."""
    if not (store / "episodes").is_dir():
        return 0
    from rlinf_data.store import EpisodeStore

    s = EpisodeStore(store, mode="r")
    infos = [s.info(i) for i in range(len(s))]
    return sum(1 for i in infos if i.success and i.status == "complete")


def build_request(args: argparse.Namespace) -> Request:
    """The facts of this start: the configs' paths and ports, the demos there are, free ports."""
    from urllib.parse import urlparse

    from rlinf_cli.errors import PreflightError
    from rlinf_cli.online_configs import naming
    from rlinf_cli.preflight import previous_run
    from rlinf_cli.train import new_run_dir
    from rlinf_contracts.config import load_config
    from rlinf_ros.config import load_graph_config

    if args.role != "all" and not args.peer:
        raise PreflightError(f"--role {args.role} needs --peer HOST: the other machine")
    if args.resume and args.new_run:
        raise PreflightError("--resume continues a run and --new-run starts one: give only one")
    overrides = split_overrides(args.overrides)
    with naming("learner"):
        raw = load_config(args.learner, list(overrides.get("learner", ())))
    train, ingest = raw.get("train") or {}, raw.get("ingest") or {}
    run_dir = Path(train.get("out_dir") or f"runs/{raw.get('name', 'online')}").resolve()
    if args.new_run:
        run_dir = Path(new_run_dir(str(run_dir)))
    if args.role != "robot" and not args.resume and previous_run(run_dir):
        raise PreflightError(
            f"key 'train.out_dir': {run_dir} already holds a run; continue it with --resume, or "
            "start a fresh one beside it with --new-run"
        )
    with naming("graph"):
        graph = load_graph_config(args.graph, list(overrides.get("graph", ())))
    demos = Path(train.get("demos") or "runs/demos/online").resolve()
    local = args.role == "all"
    push_port = urlparse(str((raw.get("push") or {}).get("url", ""))).port or 8000
    return Request(
        role=args.role,
        graph=args.graph,
        learner=args.learner,
        run_dir=run_dir,
        demos=demos,
        demos_wanted=args.demos,
        demos_have=count_successes(demos),
        ingest_port=args.ingest_port or (free_port() if local else int(ingest.get("port", 8100))),
        server_port=args.server_port or (free_port() if local else push_port),
        peer="127.0.0.1" if local else args.peer,
        robot_id=graph.streamer.stream.robot_id,
        teleop=args.teleop,
        script_task=graph.task.task if graph.task.enabled else "",
        max_attempts=args.max_attempts,
        resume=args.resume,
        overrides=overrides,
        learner_stop_timeout_s=args.learner_stop_timeout,
    )


def run(args: argparse.Namespace) -> int:
    from rlinf_cli.online_checks import check_start, check_tokens
    from rlinf_cli.secret_files import child_env, copy_line, display, token_file

    request = build_request(args)
    the_plan = plan(request)
    check_start(request, the_plan)
    dry = bool(getattr(args, "dry_run", False))
    tokens = [token_file(env, name, create=not dry) for env, name in the_plan.tokens]
    check_tokens(tokens)
    say = _printer()
    for t in tokens:
        if t.given:
            say(f"token {t.env}: from ${t.given}")
            continue
        made = "created" if t.created else ("would create" if not t.path.is_file() else "using")
        say(f"token {t.env}: {made} {display(t.path)} (mode 0600, never printed)")
        if args.role != "all" and t.env == "RLINF_INGEST_TOKEN":  # both machines hold it
            say(f"  the peer needs the same file: {copy_line(t.path, args.peer)}")
    if dry:
        return describe(the_plan, say)
    return execute(the_plan, child_env(tokens), say)


def describe(the_plan: Plan, say: Callable[[str], None]) -> int:
    """``--dry-run``: every check passed; the commands a real start would run, in order."""
    n = len(the_plan.stages)
    for k, stage in enumerate(the_plan.stages, 1):
        why = f" ({stage.why})" if stage.why else ""
        say(f"[{k}/{n}] {stage.name}{why}: {stage.command()}  > {stage.log}")
    say("dry run: every check passed; nothing started, nothing written")
    return 0


def _printer() -> Callable[[str], None]:
    def say(line: str) -> None:
        print(f"rlinf online: {line}", flush=True)

    return say


def child_argv(stage: Stage) -> list[str]:
    """The real ``rlinf`` command of a stage, run by this interpreter."""
    return [sys.executable, "-m", "rlinf_cli.main", *stage.argv]


def _is_ready(stage: Stage, child: Child) -> bool:
    return READY[stage.ready.kind](stage.ready.target, child)


def _listening(target: str, _child: Child) -> bool:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


READY: dict[str, Callable[[str, Child], bool]] = {
    "exit": lambda _t, c: c.returncode == 0,
    "file": lambda t, _c: Path(t).is_file(),
    "port": _listening,
    "started": lambda _t, c: c.proc is not None,
}


class Supervisor:
    """Runs a :class:`Plan`: start stages in order (each once the previous one is ready), watch
    them, stop them in the plan's stop order on a signal or when one ends."""

    def __init__(self, the_plan: Plan, env: dict[str, str], say: Callable[[str], None]) -> None:
        self.plan, self.env, self.say = the_plan, env, say
        self.group = ProcessGroup()
        self.stop = threading.Event()
        self.log_start: dict[str, int] = {}  # stage -> where its lines of this start begin

    def _signal(self, signum: int, _frame: Any) -> None:
        if not self.stop.is_set():
            self.say(
                f"{signal.Signals(signum).name}: stopping ({' -> '.join(self.plan.stop_order)})"
            )
        self.stop.set()

    def run(self) -> int:
        sigs = (signal.SIGINT, signal.SIGTERM)
        previous = {s: signal.signal(s, self._signal) for s in sigs}
        self.say(f"logs in {self.plan.log_dir}/ ({', '.join(self.plan.names)})")
        rc = 1
        try:
            rc = self._start_all()
            if rc == 0:
                rc = self._watch()
        finally:
            codes = self._stop_all()
            for s, h in previous.items():
                signal.signal(s, h)
        return rc if rc else (0 if all(c in (0, None) for c in codes.values()) else 1)

    def _start_all(self) -> int:
        n = len(self.plan.stages)
        for k, stage in enumerate(self.plan.stages, 1):
            if self.stop.is_set():
                return 130
            why = f" ({stage.why})" if stage.why else ""
            self.say(f"[{k}/{n}] {stage.name}{why}: {stage.command()}  > {stage.log}")
            self.log_start[stage.name] = log_size(stage.log)
            child = self.group.start(Child(stage.name, child_argv(stage), stage.log, self.env))
            rc = self._wait_ready(stage, child)
            if rc:
                return rc
            self.say(f"[{k}/{n}] {stage.name}: {stage.ready.describe()}")
        return 0

    def _wait_ready(self, stage: Stage, child: Child) -> int:
        timeout = stage.ready.timeout_s or None
        deadline = None if timeout is None else time.monotonic() + timeout
        while not _is_ready(stage, child):
            if self.stop.is_set():
                return 130
            dead = self._dead()
            if dead is not None:
                self._report(dead)
                return 1
            if deadline is not None and time.monotonic() > deadline:
                self.say(f"{stage.name} not {stage.ready.describe()} after {timeout:.0f} s; "
                         f"see {stage.log}")  # fmt: skip
                return 1
            self.stop.wait(0.2)
        return 0

    def _watch(self) -> int:
        self.say("running; Ctrl-C stops everything")
        while not self.stop.is_set():
            dead = self._dead()
            if dead is not None:
                if dead.name == "learner" and dead.returncode == 0:
                    self.say("learner finished (its budget); stopping the rest")
                    return 0
                self._report(dead)
                return 1
            self.stop.wait(0.5)
        return 0

    def _report(self, dead: Child) -> None:
        """The exit code and the child's own reason (its log's error line), then the log."""
        why = child_error(dead.log_path, self.log_start.get(dead.name, 0))
        self.say(f"{dead.name} exited with code {dead.returncode}" + (f": {why}" if why else ""))
        self.say(f"  full log: {dead.log_path}")

    def _dead(self) -> Child | None:
        """A started child that ended: any long-running one, or a run-to-the-end one that
        failed (a collect that finished with 0 is done, not dead)."""
        ends = {s.name for s in self.plan.stages if s.ready.kind == "exit"}
        return next(
            (c for c in self.group.children.values()
             if c.returncode is not None and (c.name not in ends or c.returncode != 0)),
            None,
        )  # fmt: skip

    def _stop_all(self) -> dict[str, int | None]:
        codes: dict[str, int | None] = {}
        for name in self.plan.stop_order:
            stage = self.plan.stage(name)
            if stage is None or name not in self.group.children:
                continue
            self.say(f"stopping {name}")
            codes[name] = self.group.stop(name, stage.stop_signal, stage.stop_timeout_s)
            self.say(f"{name} stopped (exit code {codes[name]})")
            if name == "graph":
                self.say(backlog_line(stage.log))
        if "learner" in codes:
            self.say(f"checkpoints in {self.plan.run_dir / 'checkpoints'}")
        return codes


def backlog_line(graph_log: Path) -> str:
    """The streamer's unsent backlog as its last stop reported it in the graph's log."""
    try:
        found = BACKLOG_LINE.findall(graph_log.read_text(errors="replace"))
    except OSError:
        found = []
    if not found:
        return f"spool backlog: not reported by the streamer (see {graph_log})"
    steps, mb, where = found[-1]
    unit = "step" if steps == "1" else "steps"
    return f"spool backlog: {steps} {unit} ({mb} MB) unsent, kept in {where}"


def execute(the_plan: Plan, env: dict[str, str], say: Callable[[str], None]) -> int:
    return Supervisor(the_plan, env, say).run()
