"""What ``rlinf online`` starts, as data: stages, command lines, ports, tokens, stop order.

Why a pure plan: which stages run (collect only when demos are missing), how the pieces find
each other (one ingest port, one server port, the same token files for every child) and the
order they stop in are the decisions worth testing, and none of them needs a process. The
runner (``rlinf_cli.online``) gathers the facts (:class:`Request`: what the configs say, how
many successful demos exist, which ports are free), calls :func:`plan` and executes the result.

Roles: ``all`` (one machine: the twin, or a robot PC with a GPU), ``robot`` (robot PC: demos if
needed, then the robot graph with the streamer) and ``learner`` (GPU box: learner + ingest and
the policy server, which the learner pushes weights to). The policy server stays with the
learner, so the robot PC needs neither torch nor the learner's checkpoints.

Overrides go to one stage by prefix: ``learner:train.time_budget_s=60``,
``graph:task.max_steps=40``, ``server:server.max_batch=8``, ``collect:teleop.script.seed=3``;
``robot:`` to the demos and the robot graph both (the robot spec's action space).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from rlinf_contracts.config import ConfigError

STAGE_NAMES = ("collect", "learner", "server", "graph")
# override prefixes: a stage, or ``robot`` for both stages that run the robot graph
PREFIXES: dict[str, tuple[str, ...]] = {
    **{name: (name,) for name in STAGE_NAMES},
    "robot": ("collect", "graph"),
}
ROLES: dict[str, tuple[str, ...]] = {
    "all": ("collect", "learner", "server", "graph"),
    "robot": ("collect", "graph"),
    "learner": ("learner", "server"),
}
INGEST_TOKEN = ("RLINF_INGEST_TOKEN", "ingest_token")  # (variable, file name)
WEIGHTS_TOKEN = ("RLINF_WEIGHTS_TOKEN", "weights_token")
# the tokens each role's children read: the weights token never leaves the GPU box
ROLE_TOKENS: dict[str, tuple[tuple[str, str], ...]] = {
    "all": (INGEST_TOKEN, WEIGHTS_TOKEN),
    "robot": (INGEST_TOKEN,),
    "learner": (INGEST_TOKEN, WEIGHTS_TOKEN),
}


@dataclass(frozen=True)
class Ready:
    """When the next stage may start: ``exit`` (ran to the end with code 0), ``file`` (``target``
    exists), ``port`` (``target`` = ``host:port`` accepts connections), ``started``."""

    kind: str
    target: str = ""
    timeout_s: float = 600.0

    def describe(self) -> str:
        return {
            "exit": "finished",
            "file": f"{self.target} written",
            "port": f"listening on {self.target}",
            "started": "started",
        }[self.kind]


@dataclass(frozen=True)
class Stage:
    name: str
    argv: tuple[str, ...]  # the rlinf subcommand and its arguments (after `rlinf`)
    log: Path
    ready: Ready
    stop_signal: int = signal.SIGINT
    stop_timeout_s: float = 30.0
    why: str = ""  # one line: what the stage does and why it runs

    def command(self) -> str:
        return "rlinf " + " ".join(self.argv)


@dataclass(frozen=True)
class Request:
    """The facts a plan is made from (every path already resolved)."""

    role: str
    graph: str
    learner: str
    run_dir: Path  # the learner's train.out_dir for this run
    demos: Path  # the learner's train.demos
    demos_wanted: int
    demos_have: int  # successful episodes already in ``demos``
    ingest_port: int
    server_port: int
    peer: str = "127.0.0.1"  # the other machine (role robot: the GPU box)
    robot_id: str = "robot0"
    teleop: str = "keyboard"
    script_task: str = ""  # teleop scripted: the graph's task (the scripted human's task)
    max_attempts: int = 0  # demo episodes tried at most (0: rlinf collect's default, 5x)
    resume: bool = False
    overrides: dict[str, tuple[str, ...]] = field(default_factory=dict)  # stage -> key=value
    learner_stop_timeout_s: float = 600.0

    @property
    def bind_host(self) -> str:
        """Where the learner's ingest and the policy server listen: every interface on a bench
        GPU box (the robot PC dials in), loopback when everything runs on one machine."""
        return "0.0.0.0" if self.role == "learner" else "127.0.0.1"


@dataclass(frozen=True)
class Plan:
    role: str
    run_dir: Path
    log_dir: Path
    stages: tuple[Stage, ...]
    urls: dict[str, str]  # streamer, server (as the robot dials them), push
    tokens: tuple[tuple[str, str], ...]  # (variable, file name) the children read

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    @property
    def stop_order(self) -> tuple[str, ...]:
        """Long-running stages, newest first: the robot graph (its streamer reports what it
        could not send), then the server, then the learner (it writes its final checkpoint)."""
        return tuple(s.name for s in reversed(self.stages) if s.ready.kind != "exit")

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)


def split_overrides(words: list[str]) -> dict[str, tuple[str, ...]]:
    """``stage:key=value`` words -> {stage: (key=value, ...)}; ``robot:`` goes to the demos
    and the robot graph alike; an unprefixed one is refused (a graph and a learner config both
    have ``env`` and ``name``: the prefix says which).

    >>> split_overrides(["learner:train.time_budget_s=60", "robot:task.max_steps=40"])
    {'learner': ('train.time_budget_s=60',), 'collect': ('task.max_steps=40',), \
'graph': ('task.max_steps=40',)}
    """
    out: dict[str, list[str]] = {}
    for word in words:
        prefix, sep, rest = word.partition(":")
        if not sep or prefix not in PREFIXES or "=" not in rest:
            raise ConfigError(
                f"override {word!r}: prefix it with the stage it is for, one of "
                f"{', '.join(s + ':' for s in PREFIXES)} (e.g. learner:train.time_budget_s=60)"
            )
        for stage in PREFIXES[prefix]:
            out.setdefault(stage, []).append(rest)
    return {k: tuple(v) for k, v in out.items()}


def _collect(r: Request, log_dir: Path) -> Stage | None:
    missing = r.demos_wanted - r.demos_have
    if missing <= 0:
        return None
    script = [f"teleop.script.task={r.script_task}"] if r.teleop == "scripted" else []
    attempts = ["--max-attempts", str(r.max_attempts)] if r.max_attempts else []
    argv = (
        "collect", r.graph, "--episodes", str(missing), "--only-success", *attempts,
        "--out", str(r.demos),
        # teleop only: no policy server yet, and the streamer stays off (demos go to the store)
        "policy_client.server_url=", "teleop.enabled=true", "teleop.always_intervene=true",
        f"teleop.device={r.teleop}", *script, "streamer.enabled=false",
        *r.overrides.get("collect", ()),
    )  # fmt: skip
    why = f"{r.demos_have} of {r.demos_wanted} successful demos in {r.demos}"
    return Stage("collect", argv, log_dir / "collect.log", Ready("exit", timeout_s=0), why=why)


def _learner(r: Request, log_dir: Path) -> Stage:
    argv = (
        "train", r.learner, "train.progress=false", *r.overrides.get("learner", ()),
        f"train.out_dir={r.run_dir}", f"ingest.port={r.ingest_port}", f"ingest.host={r.bind_host}",
        f"push.url=ws://127.0.0.1:{r.server_port}",
        *(["train.resume=true"] if r.resume else []),
    )  # fmt: skip
    initial = r.run_dir / "initial" / "meta.json"
    return Stage(
        "learner",
        argv,
        log_dir / "learner.log",
        Ready("file", str(initial)),
        stop_timeout_s=r.learner_stop_timeout_s,
        why=f"learner + ingest on :{r.ingest_port}, pushes to :{r.server_port}",
    )


def _server(r: Request, log_dir: Path) -> Stage:
    argv = (
        "serve", "--checkpoint", str(r.run_dir / "initial"), "--host", r.bind_host,
        "--port", str(r.server_port),
        # sampled actions: the robot explores
        "server.deterministic=false", *r.overrides.get("server", ()),
    )  # fmt: skip
    return Stage(
        "server",
        argv,
        log_dir / "server.log",
        Ready("port", f"127.0.0.1:{r.server_port}", timeout_s=180),
        stop_timeout_s=20,
        why="policy server on the learner's initial actor",
    )


def _graph(r: Request, log_dir: Path) -> Stage:
    argv = (
        "ros", "up", r.graph, *r.overrides.get("graph", ()),
        "task.episodes=0",  # episodes until stopped
        "streamer.enabled=true",
        f"streamer.stream.url=ws://{r.peer}:{r.ingest_port}/transitions",
        f"streamer.stream.robot_id={r.robot_id}",
        f"streamer.stream.spool_dir={r.run_dir / 'spool' / r.robot_id}",
        f"policy_client.server_url=ws://{r.peer}:{r.server_port}",
    )  # fmt: skip
    return Stage(
        "graph",
        argv,
        log_dir / "graph.log",
        Ready("started"),
        stop_timeout_s=60,
        why=f"robot graph, streaming to ws://{r.peer}:{r.ingest_port}",
    )


STAGES = {"collect": _collect, "learner": _learner, "server": _server, "graph": _graph}


def plan(r: Request) -> Plan:
    """The stages ``r.role`` runs, in start order, wired to one ingest and one server port."""
    if r.role not in ROLES:
        raise ConfigError(f"--role must be one of {', '.join(ROLES)}, got {r.role!r}")
    log_dir = r.run_dir / "logs"
    stages = tuple(s for name in ROLES[r.role] if (s := STAGES[name](r, log_dir)) is not None)
    urls = {
        "streamer": f"ws://{r.peer}:{r.ingest_port}/transitions",
        "server": f"ws://{r.peer}:{r.server_port}",
        "push": f"ws://127.0.0.1:{r.server_port}",
    }
    return Plan(r.role, r.run_dir, log_dir, stages, urls, ROLE_TOKENS[r.role])
