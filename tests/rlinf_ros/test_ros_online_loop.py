"""The online loop end to end over real processes and real DDS: `rlinf train
configs/ros_online_rlpd.yaml` (learner + ingest + weight push), `rlinf serve` of the learner's
initial actor, and the ROS 2 sim twin graph (robot node on MuJoCo, policy client, task judge,
transition streamer). Transitions reach the learner, updates run, the server's weight version
advances, and the robot then acts with pushed weights (its steps carry the new versions). The
twin runs on its simulated clock at half real time. The learner runs its ingest in a process of
its own (``ingest.process``); the other online tests use the embedded ingest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mujoco", reason="needs the sim extra")

from online_rig import (
    GRAPH_NODES,
    TOKENS,
    learner_args,
    server_version,
    start_server,
    synthetic_demos,
    twin_graph,
    wait_for,
)
from ros_procs import Procs, free_port

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.timeout(480)]


def test_twin_streams_to_learner_which_pushes_weights_back(
    tmp_path: Path, ros_domain_id: int, monkeypatch
) -> None:
    from rlinf_data.store import EpisodeStore

    for k, v in TOKENS.items():
        monkeypatch.setenv(k, v)
    ingest_port, server_port = free_port(), free_port()
    out, demos = tmp_path / "run", synthetic_demos(tmp_path / "demos")
    graph = twin_graph(tmp_path, server_port, ingest_port, sim_time=True)
    procs = Procs(tmp_path)
    try:
        learner = procs.start(
            "learner",
            learner_args(
                out,
                demos,
                ingest_port,
                server_port,
                "train.env_steps=80",
                "train.learning_starts=20",
                "train.log_every=40",
                "train.final_eval=false",
                "train.checkpoint_every=0",
                "train.time_budget_s=400",
                "push.every_updates=10",
                "algorithm.utd_ratio=1",
                "algorithm.batch_size=32",
                "ingest.pretrain_updates=5",
                "ingest.process=true",
                "model.hidden=[32,32]",
                "model.critic_hidden=[32,32]",
                "env.num_envs=1",
            ),
        )
        start_server(procs, out, server_port)
        first = None
        for kind in GRAPH_NODES:
            procs.start_node(kind, graph)
        wait_for(
            lambda: learner.poll() is not None, 360, "the learner to take 80 transitions", procs
        )
        assert learner.returncode == 0, procs.logs()
        first = server_version(server_port)
    finally:
        codes = procs.stop_all()
    assert codes == dict.fromkeys(codes, 0), (
        f"{codes}\n{procs.logs()}"
    )  # learner done, the rest stopped cleanly
    final = json.loads((out / "metrics.json").read_text())["final"]
    assert final["topology"] == "remote"
    assert "ingest: in its own process" in (tmp_path / "learner.log").read_text()
    assert final["env_steps"] >= 80 and final["ingest/transitions"] >= 80, final
    assert final["updates"] >= 65, (
        final
    )  # 5 demo-only + UTD 1 over the 60 transitions past learning_starts
    # pushes leave a thread (the newest weights win), counted in the last metrics row before the end
    assert final["push/pushes"] >= 3 and final["push/failures"] == 0, final
    assert first is not None and first >= final["push/pushes"], (
        f"policy server at weight version {first}"
    )
    eps = list(EpisodeStore(out / "episodes", mode="r"))
    assert eps and all(e.info.extra["robot_id"] == "twin0" for e in eps)
    versions = np.concatenate([e.steps["policy_version"] for e in eps])
    assert versions.min() == 0 and versions.max() >= 2, "the robot never acted with pushed weights"
    seqs = sorted(int(e.info.extra["seq0"]) + k for e in eps for k in range(len(e)))
    assert len(seqs) == len(set(seqs)) and len(seqs) >= 80
