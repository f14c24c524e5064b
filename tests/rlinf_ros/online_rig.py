"""The online-RL rig of the ``test_ros_online_*`` tests and ``benchmarks/ros_online_rlpd.py``:
learner (``rlinf train configs/ros_online_rlpd.yaml``) + policy server (``rlinf serve`` of the
learner's initial actor) + the ROS 2 sim twin graph with the streamer on, as real processes; and
the one-command form of the same loop (``rlinf online`` on the push twin, :func:`online_push`)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from ros_procs import ROOT, Procs

RLINF = str(Path(sys.executable).parent / "rlinf")
TOKENS = {"RLINF_INGEST_TOKEN": "ingest-secret", "RLINF_WEIGHTS_TOKEN": "weights-secret"}
GRAPH_NODES = ("robot", "policy_client", "task", "streamer")
# configs/ros_online_rlpd.yaml learns ee_delta_pos (position deltas + gripper, orientation held):
# the twin's robot_spec says the same (`rlinf spec mujoco_franka/reach control=ee_delta_pos`)
TWIN_ACTION = {"control": "ee_delta_pos", "dim": 4}
ACTION_DIM = TWIN_ACTION["dim"]


def twin_base() -> dict:
    """configs/ros_sim_franka.yaml with the learner's action space."""
    cfg = yaml.safe_load((ROOT / "configs/ros_sim_franka.yaml").read_text())
    cfg["policy_client"]["robot_spec"]["action"].update(TWIN_ACTION)
    return cfg


def synthetic_demos(path: Path, episodes: int = 3, steps: int = 20) -> Path:
    """A few demo episodes with the twin's layout (30-D state, 4-D ee_delta_pos action): enough for
    RLPD's demo half in a plumbing test (the benchmark records real ones with ``rlinf collect``)."""
    from rlinf_contracts.episode import Episode, EpisodeInfo, StepLayout
    from rlinf_data.store import EpisodeStore

    rng = np.random.default_rng(0)
    layout = StepLayout(30, ACTION_DIM)
    store = EpisodeStore(path)
    for _ in range(episodes):
        steps_d = {
            "state": rng.normal(size=(steps, 30)).astype(np.float32),
            "action": rng.uniform(-1, 1, (steps, ACTION_DIM)).astype(np.float32),
            "reward": np.eye(steps, dtype=np.float32)[-1],
            "terminated": np.eye(steps, dtype=bool)[-1],
            "truncated": np.zeros(steps, bool),
            "intervention": np.ones(steps, bool),
            "policy_version": np.zeros(steps, np.int64),
            "timestamp": np.zeros(steps, np.float64),
        }
        store.write(
            Episode(
                EpisodeInfo(
                    task="mujoco_franka/reach",
                    layout=layout,
                    source="demo",
                    success=True,
                    status="complete",
                ),
                steps_d,
                {"state": np.zeros(30, np.float32)},
            )
        )
    return path


def twin_graph(
    tmp_path: Path,
    server_port: int,
    ingest_port: int,
    robot_id: str = "twin0",
    backend: str = "sim",
    sim_time: bool = False,
) -> Path:
    """The twin graph streaming to the learner; ``sim_time``: on the robot node's simulated clock at
    half real time (a loaded machine slows the twin's world, not one node against another)."""
    cfg = twin_base()
    if sim_time:
        cfg["use_sim_time"] = True
        cfg["robot"]["sim_clock"] = True
        cfg["robot"]["real_time_factor"] = 0.5
    cfg["robot"]["arms"][0]["backend"] = backend
    cfg["policy_client"]["server_url"] = f"ws://127.0.0.1:{server_port}"
    cfg["policy_client"]["reconnect_s"] = 0.3
    cfg["task"].update(episodes=0, results_path=str(tmp_path / "episodes.json"))
    cfg["streamer"] = {
        "enabled": True,
        "stream": {
            "url": f"ws://127.0.0.1:{ingest_port}/transitions",
            "robot_id": robot_id,
            "spool_dir": str(tmp_path / "spool"),
            "backoff_s": 0.2,
            "backoff_max_s": 1.0,
        },
        "episodes": {"source": "online"},
    }
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


# the tiny learner of the one-command runs: small nets, updates from the first steps, no eval
# and no checkpoints on the way; each test adds its time budget and what it watches
TINY_ONLINE_LEARNER = (
    "learner:train.final_eval=false",
    "learner:ingest.pretrain_updates=5",
    "learner:model.hidden=[32,32]",
    "learner:model.critic_hidden=[32,32]",
    "learner:env.num_envs=1",
    "learner:train.learning_starts=20",
    "learner:algorithm.batch_size=32",
    "learner:train.log_every=40",
    "learner:train.checkpoint_every=0",
    "learner:train.tensorboard=false",
)


def online_push(
    tmp_path: Path, monkeypatch: Any, *overrides: str
) -> tuple[subprocess.Popen, Path, Path]:
    """``rlinf online`` of the push twin started in the background: the scripted human records
    one demo (up to 20 attempts: it fails some pushes on a loaded machine), the learner writes
    to ``tmp_path/run``, ``overrides`` go to the command as given; the run makes its own tokens
    in ``tmp_path/secrets`` (none comes from the environment). Returns (the process, the run
    folder, the file holding its console output)."""
    monkeypatch.setenv("RLINF_SECRETS_DIR", str(tmp_path / "secrets"))
    for var in TOKENS:
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var + "_FILE", raising=False)
    run, demos, out = tmp_path / "run", tmp_path / "demos", tmp_path / "online.txt"
    argv = [
        sys.executable, "-m", "rlinf_cli.main", "online",
        "configs/ros_sim_franka_push.yaml", "configs/ros_online_rlpd_push.yaml",
        "--teleop", "scripted", "--demos", "1", "--max-attempts", "20",
        f"learner:train.out_dir={run}", f"learner:train.demos={demos}", *overrides,
    ]  # fmt: skip
    with open(out, "wb") as f:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    return proc, run, out


def learner_args(
    out: Path, demos: Path, ingest_port: int, server_port: int, *overrides: str
) -> list[str]:
    return [
        RLINF,
        "train",
        str(ROOT / "configs/ros_online_rlpd.yaml"),
        f"train.out_dir={out}",
        f"train.demos={demos}",
        f"ingest.port={ingest_port}",
        f"push.url=ws://127.0.0.1:{server_port}",
        "train.progress=false",
        "train.tensorboard=false",
        *overrides,
    ]


def wait_for(cond: Any, timeout: float, what: str, procs: Procs) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{procs.logs()}")


def start_server(procs: Procs, out: Path, port: int, name: str = "server") -> None:
    wait_for(
        lambda: (
            (out / "initial" / "model.safetensors").is_file()
            and (out / "initial" / "meta.json").is_file()
        ),
        120,
        "the learner's initial actor",
        procs,
    )
    # sampled actions: the online policy explores (SERL's actor samples too)
    procs.start(
        name,
        [
            RLINF,
            "serve",
            "--checkpoint",
            str(out / "initial"),
            "--port",
            str(port),
            "--torch-threads",
            "1",
            "server.deterministic=false",
        ],
    )


def server_version(port: int) -> int:
    """The weight version the policy server reports to a new client."""
    from policy_server.client import open_sync
    from policy_server.messages import ServerMetadata
    from rlinf_contracts.wire import unpackb

    ws = open_sync(f"ws://127.0.0.1:{port}/", open_timeout=10)
    try:
        return ServerMetadata.from_wire(unpackb(ws.recv(timeout=10))).weight_version
    finally:
        ws.close()
