"""The served and ROS 2 twin evals of benchmarks/vla_ros.py: ``rlinf serve`` and the twin's
nodes as process groups, :class:`WirePolicy` (``rlinf eval``'s loop over the wire), and the two
eval paths that use them.

Split out of vla_ros.py to keep that script about the run and its verdict; vla_ros.py imports
these names after it has put benchmarks/ last on sys.path (benchmarks/policy_server.py would
otherwise shadow the policy_server package).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rlinf_ros.domains import free_domains

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WirePolicy:
    """``act`` of a learner policy, answered by a policy server: each row of the batch is one
    client connection (one robot each) sending the canonical observation map — state, the
    camera frames and the instruction — and getting its chunk back. Lets ``rlinf eval``'s own
    loop (``evaluate_policy``: the same held-out episodes) run through the wire."""

    def __init__(self, url: str, n: int) -> None:
        from policy_server.client import PolicyClient

        self.url, self.n = url, n
        self.clients = [PolicyClient(url) for _ in range(n)]
        self.requests = 0
        self.round_trip_ms: list[float] = []

    def act(self, obs: dict[str, Any], deterministic: bool = True) -> tuple[Any, Any, None]:
        import numpy as np

        out = []
        t0 = time.perf_counter()
        for i in range(len(obs["state"])):
            req = {
                "state": obs["state"][i],
                "images": {c: v[i] for c, v in (obs.get("images") or {}).items()},
                "instruction": (obs.get("instruction") or [""] * len(obs["state"]))[i],
            }
            out.append(np.asarray(self.clients[i % self.n].infer(req)["actions"], np.float32))
        self.requests += len(out)
        self.round_trip_ms.append((time.perf_counter() - t0) * 1e3 / max(len(out), 1))
        return np.stack(out), np.zeros(len(out)), None

    def close(self) -> None:
        for c in self.clients:
            c.close()


def served_eval(ckpt: str, split: str, episodes: int, log_dir: Path) -> dict[str, Any]:
    """``rlinf serve --checkpoint CKPT`` in a process; ``rlinf eval``'s loop on the same held-out
    episodes with every action from the server (:class:`WirePolicy`)."""
    import numpy as np

    from learner.checkpoint import load_policy
    from learner.eval.embodied import checkpoint_config, evaluate_policy, split_kwargs

    _, meta = load_policy(ckpt)
    cfg = checkpoint_config(meta)
    server = _Server(ckpt, log_dir)
    remote = WirePolicy(server.url, min(cfg.eval.num_envs, episodes))
    try:
        t0 = time.perf_counter()
        r = evaluate_policy(
            remote,
            cfg.eval.env or cfg.env.name,
            split_kwargs(cfg, split),
            episodes,
            cfg.eval.seed_offset,
            cfg.eval.num_envs,
        )
        return {
            "success_rate": r["success_rate"],
            "episodes": r["episodes"],
            "wall_s": time.perf_counter() - t0,
            "requests": remote.requests,
            "round_trip_ms_p50": float(np.median(remote.round_trip_ms)),
        }
    finally:
        remote.close()
        server.stop()


class _Server:
    """``rlinf serve --checkpoint`` in its own process group, listening on a free port."""

    def __init__(self, ckpt: str, log_dir: Path) -> None:
        self.port = _free_port()
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log = open(log_dir / "serve.log", "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rlinf_cli.main",
                "serve",
                "--checkpoint",
                ckpt,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"rlinf serve exited ({self.proc.returncode}); see {log_dir / 'serve.log'}"
                )
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.5)
        raise RuntimeError("rlinf serve did not listen within 120 s")

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def stop(self) -> None:
        _stop_group(self.proc)
        self.log.close()


def _stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def twin_eval(
    ckpt: str,
    split: str,
    episodes: int,
    log_dir: Path,
    timeout_s: float = 1800,
    control_hz: float = 0.0,
) -> dict[str, Any]:
    """``rlinf serve`` + the ROS 2 twin of ``configs/ros_sim_franka_language.yaml`` (robot, policy
    client and task nodes as processes, a random ROS_DOMAIN_ID); the task node's episode results."""

    import yaml

    from learner.checkpoint import load_policy
    from learner.eval.embodied import checkpoint_config

    log_dir.mkdir(parents=True, exist_ok=True)
    seed_offset = checkpoint_config(load_policy(ckpt)[1]).eval.seed_offset
    server = _Server(ckpt, log_dir)
    cfg = yaml.safe_load((ROOT / "configs/ros_sim_franka_language.yaml").read_text())
    cfg["robot"]["arms"][0]["scene_seed"] = (
        seed_offset  # replay the sim eval's episodes (same held-out seeds)
    )
    cfg["policy_client"]["server_url"] = server.url
    if split not in ("id", "train"):
        cfg["robot"]["arms"][0]["scene"] = f"franka_language/mix:{split}"
    results = log_dir / "episodes.json"
    results.unlink(missing_ok=True)
    cfg["task"].update(episodes=episodes, results_path=str(results.resolve()))
    if control_hz:  # default: the config's rate (20 Hz, the training rate)
        cfg["policy_client"]["control_hz"] = cfg["task"]["control_hz"] = control_hz
    config = log_dir / "graph.yaml"
    config.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "ROS_DOMAIN_ID": str(free_domains()[0]), "PYTHONUNBUFFERED": "1"}
    procs = []
    t0 = time.perf_counter()
    try:
        for kind in ("robot", "policy_client", "task"):
            log = open(log_dir / f"{kind}.log", "wb")
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", f"rlinf_ros.nodes.{kind}", "--config", str(config)],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        while not results.exists():
            if time.perf_counter() - t0 > timeout_s:
                raise RuntimeError(
                    f"the twin did not finish {episodes} episodes in {timeout_s:.0f} s; logs in "
                    f"{log_dir}"
                )
            dead = [p.args[2] for p in procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"twin node(s) exited: {dead}; logs in {log_dir}")
            time.sleep(1.0)
        summary = json.loads(results.read_text())
    finally:
        for p in procs:
            _stop_group(p)
        server.stop()
    per_episode = "".join("1" if r["success"] else "0" for r in summary.get("results", []))
    return {
        "success_rate": summary["success_rate"],
        "episodes": summary["episodes"],
        "wall_s": time.perf_counter() - t0,
        "per_episode": per_episode,
    }
