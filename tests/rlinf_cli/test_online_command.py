"""``rlinf online``: the plan (which stages run, how ports and tokens are wired, the stop order),
the token files, and the supervisor over stand-in children (start order, Ctrl-C, a learner that
reaches its budget, a child that fails). The real commands over ROS:
``tests/rlinf_ros/test_online_command_ros.py``."""

from __future__ import annotations

import dataclasses
import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from rlinf_cli import online
from rlinf_cli.online_plan import Ready, Request, plan, split_overrides
from rlinf_cli.secret_files import child_env, copy_line, token_file
from rlinf_contracts.config import ConfigError


def request(tmp_path: Path, **kw) -> Request:
    base = dict(
        role="all",
        graph="configs/ros_sim_franka_push.yaml",
        learner="configs/ros_online_rlpd_push.yaml",
        run_dir=tmp_path / "run",
        demos=tmp_path / "demos",
        demos_wanted=20,
        demos_have=0,
        ingest_port=18100,
        server_port=18000,
        teleop="scripted",
        script_task="push",
    )
    return Request(**{**base, **kw})


def arg(stage, key: str) -> str:
    """The value of ``key=value`` (or of flag ``key``) in a stage's command line."""
    argv = list(stage.argv)
    if key.startswith("--"):
        return argv[argv.index(key) + 1]
    found = [w.split("=", 1)[1] for w in argv if w.startswith(key + "=")]
    assert found, f"{key} not in {stage.command()}"
    return found[-1]  # the last one wins, as in the config loader


def test_collect_runs_only_when_successful_demos_are_missing(tmp_path: Path) -> None:
    p = plan(request(tmp_path, demos_have=12))
    assert p.names == ("collect", "learner", "server", "graph")
    collect = p.stage("collect")
    assert collect is not None and collect.ready.kind == "exit"
    assert arg(collect, "--episodes") == "8" and "--only-success" in collect.argv
    assert arg(collect, "--out") == str(tmp_path / "demos")
    assert arg(collect, "policy_client.server_url") == ""  # teleop only
    assert arg(collect, "streamer.enabled") == "false"
    assert arg(collect, "teleop.script.task") == "push"
    assert "--max-attempts" not in collect.argv  # rlinf collect's default
    again = plan(request(tmp_path, demos_have=12, max_attempts=30)).stage("collect")
    assert again is not None and arg(again, "--max-attempts") == "30"
    assert plan(request(tmp_path, demos_have=20)).names == ("learner", "server", "graph")


def test_roles_split_the_stages_between_the_machines(tmp_path: Path) -> None:
    robot = plan(request(tmp_path, role="robot", peer="gpu-box"))
    learner = plan(request(tmp_path, role="learner", peer="robot-pc", demos_have=20))
    assert robot.names == ("collect", "graph") and learner.names == ("learner", "server")
    # the weights token never leaves the GPU box; the ingest token is on both
    assert [e for e, _ in robot.tokens] == ["RLINF_INGEST_TOKEN"]
    assert [e for e, _ in learner.tokens] == ["RLINF_INGEST_TOKEN", "RLINF_WEIGHTS_TOKEN"]


def test_one_machine_wires_one_ingest_and_one_server_port_to_every_piece(tmp_path: Path) -> None:
    p = plan(request(tmp_path, demos_have=20))
    learner, server, graph = (p.stage(n) for n in ("learner", "server", "graph"))
    assert learner and server and graph
    assert arg(learner, "ingest.port") == "18100" and arg(learner, "ingest.host") == "127.0.0.1"
    assert arg(graph, "streamer.stream.url") == "ws://127.0.0.1:18100/transitions"
    assert arg(learner, "push.url") == "ws://127.0.0.1:18000"
    assert arg(server, "--port") == "18000" and arg(server, "--host") == "127.0.0.1"
    assert arg(graph, "policy_client.server_url") == "ws://127.0.0.1:18000"
    # the server serves the learner's initial actor, once the learner wrote it
    assert arg(server, "--checkpoint") == str(tmp_path / "run" / "initial")
    assert learner.ready == Ready("file", str(tmp_path / "run" / "initial" / "meta.json"))
    assert arg(learner, "train.out_dir") == str(tmp_path / "run")
    assert arg(graph, "streamer.enabled") == "true" and arg(graph, "task.episodes") == "0"
    assert arg(graph, "streamer.stream.spool_dir").startswith(str(tmp_path / "run" / "spool"))
    assert all(s.log.parent == tmp_path / "run" / "logs" for s in p.stages)


def test_a_bench_listens_on_every_interface_and_dials_the_peer(tmp_path: Path) -> None:
    learner = plan(request(tmp_path, role="learner", peer="robot-pc", demos_have=20))
    robot = plan(request(tmp_path, role="robot", peer="gpu-box", demos_have=20))
    assert arg(learner.stages[0], "ingest.host") == "0.0.0.0"
    assert arg(learner.stages[1], "--host") == "0.0.0.0"
    assert arg(learner.stages[0], "push.url") == "ws://127.0.0.1:18000"  # same box
    (graph,) = robot.stages
    assert arg(graph, "streamer.stream.url") == "ws://gpu-box:18100/transitions"
    assert arg(graph, "policy_client.server_url") == "ws://gpu-box:18000"


def test_stop_order_is_graph_then_server_then_learner(tmp_path: Path) -> None:
    assert plan(request(tmp_path)).stop_order == ("graph", "server", "learner")
    assert plan(request(tmp_path, role="robot", peer="g")).stop_order == ("graph",)


def test_overrides_go_to_the_stage_they_name_and_wiring_wins(tmp_path: Path) -> None:
    words = ["learner:train.time_budget_s=60", "graph:task.max_steps=40", "learner:ingest.port=1"]
    ov = split_overrides(words)
    assert ov == {
        "learner": ("train.time_budget_s=60", "ingest.port=1"),
        "graph": ("task.max_steps=40",),
    }
    p = plan(request(tmp_path, demos_have=20, overrides=ov))
    learner, graph = p.stage("learner"), p.stage("graph")
    assert learner and graph
    assert arg(learner, "train.time_budget_s") == "60" and arg(learner, "ingest.port") == "18100"
    assert arg(graph, "task.max_steps") == "40"
    assert "train.resume=true" in plan(request(tmp_path, resume=True)).stages[1].argv
    with pytest.raises(ConfigError, match="prefix it with the stage"):
        split_overrides(["train.time_budget_s=60"])  # env / name exist in both configs
    with pytest.raises(ConfigError, match="prefix it with the stage"):
        split_overrides(["policy:driver_hz=5"])
    # robot: is the robot graph's, for the demos and the online graph alike
    both = split_overrides(["robot:policy_client.robot_spec.action.dim=4"])
    assert both["collect"] == both["graph"] == ("policy_client.robot_spec.action.dim=4",)


def test_tokens_are_made_once_private_and_never_shown(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RLINF_SECRETS_DIR", str(tmp_path / "secrets"))
    for var in ("RLINF_INGEST_TOKEN", "RLINF_INGEST_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    first = token_file("RLINF_INGEST_TOKEN", "ingest_token")
    again = token_file("RLINF_INGEST_TOKEN", "ingest_token")
    assert first.created and not again.created and again.path == first.path
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(first.path.parent.stat().st_mode) == 0o700
    value = first.path.read_text().strip()
    assert len(value) >= 32
    env = child_env([first])
    assert env == {"RLINF_INGEST_TOKEN_FILE": str(first.path)}
    line = copy_line(first.path, "robot-pc")
    assert value not in line and "scp -p" in line and "robot-pc:" in line
    # a token the user already exported is used as is: no file is made
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN_FILE", str(tmp_path / "mine"))
    mine = token_file("RLINF_WEIGHTS_TOKEN", "weights_token")
    assert mine.given == "RLINF_WEIGHTS_TOKEN_FILE" and child_env([mine]) == {}
    assert not (tmp_path / "secrets" / "weights_token").exists()


def test_the_streamers_backlog_line_is_read_from_the_graph_log(tmp_path: Path) -> None:
    log = tmp_path / "graph.log"
    log.write_text(
        "x streamer INFO __main__: streamer: stopped with 42 steps unsent (0.125 MB) in /s/r0\n"
    )
    assert online.backlog_line(log) == "spool backlog: 42 steps (0.125 MB) unsent, kept in /s/r0"
    log.write_text(
        "x streamer INFO __main__: streamer: stopped with 1 steps unsent (0.0 MB) in /s\n"
    )
    assert online.backlog_line(log) == "spool backlog: 1 step (0.0 MB) unsent, kept in /s"
    log.write_text("nothing\n")
    assert "not reported" in online.backlog_line(log)


# ---- the supervisor over stand-in children -------------------------------------------------------

STAND_IN = """
import pathlib, signal, sys, time
name, trace, mode = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
def say(w):
    with trace.open("a") as f:
        f.write(f"{w} {name}\\n")
def on_int(*_):
    say("stop")
    if name == "graph":
        print("streamer: stopped with 7 steps unsent (0.002 MB) in /spool/r0", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, on_int)
say("start")
if mode == "refuse":  # as rlinf train refuses a key: a log line, then its one-line error
    print("12:00:00 I rlinf_cli.train: loading the config", flush=True)
    print("rlinf train: config error: unknown key 'x.y'. Did you mean 'x.z'?", file=sys.stderr)
    print("", flush=True)
    sys.exit(2)
if mode == "crash":
    raise ValueError("the replay is empty")
(trace.parent / f"{name}.up").touch()
if mode == "exit0":
    sys.exit(0)
if mode == "exit1":
    time.sleep(0.3)
    sys.exit(1)
if mode == "budget":  # ends by itself with 0 once the whole loop runs
    while "start graph" not in trace.read_text():
        time.sleep(0.05)
    sys.exit(0)
while True:
    time.sleep(0.05)
"""


def run_stand_ins(tmp_path: Path, monkeypatch, modes: dict[str, str], interrupt: bool) -> tuple:
    trace = tmp_path / "trace.txt"
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    p = plan(request(tmp_path, demos_have=19))
    # a stage is ready once its stand-in wrote <name>.up (the real readiness checks are above)
    p = dataclasses.replace(
        p,
        stages=tuple(
            s
            if s.ready.kind == "exit"
            else dataclasses.replace(s, ready=Ready("file", str(tmp_path / f"{s.name}.up")))
            for s in p.stages
        ),
    )
    monkeypatch.setattr(
        online,
        "child_argv",
        lambda s: [sys.executable, str(script), s.name, str(trace), modes.get(s.name, "run")],
    )
    lines: list[str] = []

    def ctrl_c() -> None:  # once all four are up, as a terminal's Ctrl-C reaches the supervisor
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if trace.exists() and trace.read_text().count("start") == 4:
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    if interrupt:
        threading.Thread(target=ctrl_c, daemon=True).start()
    rc = online.execute(p, {}, lines.append)
    return rc, trace.read_text().split("\n")[:-1], lines


def test_ctrl_c_stops_everything_in_reverse_order(tmp_path: Path, monkeypatch) -> None:
    rc, trace, lines = run_stand_ins(tmp_path, monkeypatch, {"collect": "exit0"}, interrupt=True)
    assert rc == 0, lines
    assert trace == [
        "start collect",
        "start learner",
        "start server",
        "start graph",
        "stop graph",
        "stop server",
        "stop learner",
    ]
    assert "spool backlog: 7 steps (0.002 MB) unsent, kept in /spool/r0" in lines
    assert [ln for ln in lines if "stopped (exit code" in ln] == [
        f"{n} stopped (exit code 0)" for n in ("graph", "server", "learner")
    ]
    assert any(ln.startswith("[1/4] collect") for ln in lines)


def test_a_learner_at_its_budget_stops_the_rest(tmp_path: Path, monkeypatch) -> None:
    modes = {"collect": "exit0", "learner": "budget"}
    rc, trace, lines = run_stand_ins(tmp_path, monkeypatch, modes, interrupt=False)
    assert rc == 0, lines
    assert "learner finished (its budget); stopping the rest" in lines
    assert trace[-2:] == ["stop graph", "stop server"]
    assert "spool backlog: 7 steps (0.002 MB) unsent, kept in /spool/r0" in lines


def test_a_crashed_learner_stops_the_rest_and_fails(tmp_path: Path, monkeypatch) -> None:
    modes = {"collect": "exit0", "learner": "exit1"}
    rc, trace, lines = run_stand_ins(tmp_path, monkeypatch, modes, interrupt=False)
    assert rc == 1 and "learner exited with code 1" in " ".join(lines), lines
    assert "stop learner" not in trace


def test_a_failed_collect_starts_nothing_else(tmp_path: Path, monkeypatch) -> None:
    rc, trace, lines = run_stand_ins(tmp_path, monkeypatch, {"collect": "exit1"}, interrupt=False)
    assert rc == 1 and trace == ["start collect"]
    assert "collect exited with code 1" in " ".join(lines)


def test_a_child_that_refuses_its_config_is_reported_with_its_own_error(
    tmp_path: Path, monkeypatch
) -> None:
    """The child's one-line refusal is printed beside its exit code (and the log named); an
    older run's error in the same (appended) log is not taken for this one's."""
    logs = tmp_path / "run" / "logs"
    logs.mkdir(parents=True)
    (logs / "learner.log").write_text("rlinf train: config error: an older run's mistake\n")
    modes = {"collect": "exit0", "learner": "refuse"}
    rc, trace, lines = run_stand_ins(tmp_path, monkeypatch, modes, interrupt=False)
    assert rc == 1 and trace == ["start collect", "start learner"], lines
    assert (
        "learner exited with code 2: rlinf train: config error: unknown key 'x.y'. "
        "Did you mean 'x.z'?"
    ) in lines, lines
    assert f"  full log: {logs / 'learner.log'}" in lines
    assert not any("older run" in ln for ln in lines), lines


def test_a_crashed_child_is_reported_with_the_last_line_of_its_traceback(
    tmp_path: Path, monkeypatch
) -> None:
    rc, _, lines = run_stand_ins(tmp_path, monkeypatch, {"collect": "crash"}, interrupt=False)
    assert rc == 1
    assert "collect exited with code 1: ValueError: the replay is empty" in lines, lines
