"""Every command in README.md runs: the ```bash blocks and the "Everyday use" table.

Each command is run as written, on a tiny budget, with ``--dry-run``, or through a dry
equivalent named in ``MAPPED`` (long or interactive ones); a command this file does not know
fails the test, so the README cannot drift from the CLI. ``runs/sim_franka_reach_ppo`` in a
command means a tiny run this test trains first.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlinf_cli.main import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DEMO = "configs/sim_franka_reach_ppo.yaml"
RUN = "runs/sim_franka_reach_ppo"
TINY = [
    "train.iterations=2",
    "eval.episodes=2",
    "eval.num_envs=2",
    "eval.video=false",
    "train.progress=false",
    "train.tensorboard=false",
]
# command as written -> what the test runs instead (None: not run here, with the reason)
MAPPED: dict[str, str | None] = {
    "make demo": f"rlinf train {DEMO} --dry-run",  # the same command `make demo` runs, checked
    "make test": None,  # this test is part of it
    # tests/rlinf_ros runs it
    "rlinf ros up configs/ros_sim_franka.yaml": "rlinf ros nodes configs/ros_sim_franka.yaml",
    # tests/rlinf_ros/test_online_command_ros.py runs it (real processes, Ctrl-C)
    "rlinf online configs/ros_sim_franka_push.yaml configs/ros_online_rlpd_push.yaml"
    " --teleop scripted": None,
    # tests/rlinf_data/test_mcap_bags.py converts recorded bags both ways
    "rlinf convert recording.mcap runs/demos/from_bag": None,
    # tests/learner/llm/test_llm_fsdp_cli.py trains an LLM with fsdp ranks, evaluates and serves it
    "rlinf serve --checkpoint runs/llm_grpo_arith --port 8001": None,
}


def readme_commands() -> list[str]:
    text = README.read_text()
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line and not line.startswith("#"):
                cmds.append(line)
    table = text[text.index("## Everyday use") :]
    table = table[: table.index("\n\n", table.index("|---"))]
    for row in table.splitlines()[3:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        cmds += re.findall(r"`([^`]+)`", cells[1])
    return [_normalise(c) for c in cmds]


def _normalise(cmd: str) -> str:
    cmd = cmd.replace(".venv/bin/", "")
    m = re.fullmatch(r'eval "\$\((.*)\)"', cmd)
    return m.group(1) if m else cmd


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"policy server did not listen on {port}")


class Runner:
    def __init__(self, run_dir: Path, capsys: pytest.CaptureFixture) -> None:
        self.run_dir, self.capsys, self.port = run_dir, capsys, None

    def rlinf(self, argv: list[str], code: int = 0) -> str:
        try:
            rc = main(argv)
        except SystemExit as e:  # --version
            rc = int(e.code or 0)
        out = self.capsys.readouterr()
        assert rc == code, f"rlinf {' '.join(argv)} -> {rc}\n{out.err[-2000:]}"
        return out.out + out.err

    def train(self, argv: list[str]) -> None:
        resume = any(a.startswith("train.resume") for a in argv)
        real = "actor.lr=3e-4" in argv or resume
        # no cluster here (RAY_ADDRESS and Ray's address file hidden): exit 2
        if "--ray-address" in argv:
            text = self.rlinf([*argv, "--dry-run"], code=2)
            assert (
                "Traceback" not in text and "--ray-address" in text and "ray start --head" in text
            ), text
            return
        if not real:
            # a dry run refuses an out_dir that holds a run (as the run would): after `make demo`
            # the default runs/<name> does, so the check points at a fresh folder of its own
            dry_out = f"train.out_dir={self.run_dir.parent / 'dry' / Path(argv[1]).stem}"
            self.rlinf([*argv, dry_out] + ([] if "--dry-run" in argv else ["--dry-run"]))
            return
        self.rlinf(
            [
                *argv,
                *TINY,
                f"train.out_dir={self.run_dir}",
                *(["train.iterations=3"] if resume else []),
            ]
        )

    def serve(self, argv: list[str]) -> None:
        self.port = _free_port()
        argv = [a for a in argv if a not in ("--port", "8000")] + ["--port", str(self.port)]
        self.server = subprocess.Popen(
            [sys.executable, "-m", "rlinf_cli.main", *argv],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_port(self.port, self.server)

    def stop(self) -> None:
        """Stop the policy server with SIGTERM: it closes its connections and exits 0."""
        if getattr(self, "server", None) is not None:
            server, self.server = self.server, None
            server.terminate()
            err = server.communicate(timeout=30)[1]
            assert server.returncode == 0, (
                f"`rlinf serve` exited {server.returncode} on SIGTERM:\n{err[-2000:]}"
            )

    def node(self, cmd: str) -> None:
        pytest.importorskip("rclpy")
        proc = subprocess.Popen(
            [sys.executable, *shlex.split(cmd)[1:]],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen, deadline = [], time.time() + 60
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                seen.append(line)
                if "node up" in line or time.time() > deadline:
                    break
        finally:
            proc.terminate()
            rest = proc.communicate(timeout=30)[1]
        assert any("node up" in line for line in seen), "".join(seen)[-2000:]
        assert proc.returncode == 0, (
            f"the node exited {proc.returncode} on SIGTERM:\n{rest[-2000:]}"
        )

    def run(self, cmd: str) -> None:
        t0 = time.perf_counter()
        self._run(cmd)
        print(f"{time.perf_counter() - t0:6.1f} s  {cmd}", file=sys.__stderr__)

    def _run(self, cmd: str) -> None:
        argv = shlex.split(cmd.replace(RUN, str(self.run_dir)))
        if argv[0] == "python":
            return self.node(cmd)
        assert argv[0] == "rlinf", f"README command not known to tests/test_readme.py: {cmd}"
        argv = argv[1:]
        if argv[0] == "train":
            return self.train(argv)
        if argv[0] == "serve":
            self.stop()
            return self.serve(argv)
        if argv[0] == "eval":
            argv = [a.replace("ws://127.0.0.1:8000", f"ws://127.0.0.1:{self.port}") for a in argv]
            argv = [("2" if a == "50" else a) for a in argv] + (
                ["--episodes", "1"] if "--episodes" not in argv else []
            )
            argv += ["eval.num_envs=1", "env.num_envs=1"] if "--policy-server" not in argv else []
        self.rlinf(argv)


def test_every_mapped_command_is_still_in_the_readme():
    """A README edit that renames a mapped command would otherwise make the long test run the
    new spelling for real (an online loop never returns), so a stale mapping fails here first."""
    commands = readme_commands()
    stale = [cmd for cmd in MAPPED if cmd not in commands]
    assert not stale, f"README no longer has these commands; update MAPPED: {stale}"


def test_every_readme_command_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("learner.cluster.RAY_CURRENT_CLUSTER", tmp_path / "no-cluster")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    commands = readme_commands()
    assert len(commands) >= 20, commands
    first = f"rlinf train {DEMO} actor.lr=3e-4 placement.env=0"
    assert first in commands  # the first Everyday-use row trains for real (2 iterations)
    runner = Runner(tmp_path / "run", capsys)
    runner.run(first)
    assert (tmp_path / "run" / "curves.png").is_file()
    try:
        for cmd in commands:
            mapped = MAPPED.get(cmd, cmd)
            if mapped is not None and cmd != first:
                runner.run(mapped)
    finally:
        runner.stop()
    import json

    history = json.loads((tmp_path / "run" / "metrics.json").read_text())["history"]
    assert [r["iteration"] for r in history] == [
        0.0,
        1.0,
        2.0,
    ]  # the resume row appended iteration 2
