"""A fleet on a real three-node Ray cluster on one host: the learner on node A, two env workers
on nodes B and C, placed by the placement grammar alone.

Node A offers ``learner_node``, B and C one unit each of ``fleet:env`` (the label every robot PC
of a fleet would offer). ``learner,replay: 0@learner_node`` pins the off-policy learner to A;
``env: 1-2@fleet:env`` asks for two env workers, each needing one unit, so Ray must put one on
B and one on C. The off-policy ``async`` topology runs a couple of iterations of SAC on
``mujoco_franka/reach`` (configs/sim_franka_reach_sac.yaml, shrunk): the env workers collect with
the weights the learner publishes. A driver process (as ``rlinf train --ray-address`` would be)
builds the config through the CLI's checks, trains, and asks each live actor, through Ray's
runtime context, which node it runs on and which weight version its policy holds.

Nodes are separate raylets of ``ray.cluster_utils.Cluster`` (each with its own object store);
the driver joins them by the GCS address, as on machines joined with ``ray start``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OVERRIDES = [
    "name=fleet",
    "placement={'learner,replay': '0@learner_node', env: '1-2@fleet:env'}",
    "env.num_envs=2",
    "env.max_episode_steps=25",
    "model.hidden=[32,32]",
    "model.critic_hidden=[32,32]",
    "algorithm.batch_size=32",
    "algorithm.utd_ratio=0.5",
    "train.env_steps=200",
    "train.warmup_steps=50",
    "train.learning_starts=50",
    "train.log_every=100",
    "train.publish_every=5",
    "train.queue_episodes=2",
    "train.progress=false",
    "train.tensorboard=false",
    "train.final_eval=false",
]

# the driver: the CLI's config build and checks, then the placement's topology on the cluster
DRIVER = """
import json, sys, time
import ray
from learner.channel.errors import ChannelTimeout
from rlinf_cli.train import build
from learner.cluster import Cluster
from learner.offpolicy.config import COMPONENTS
from learner.offpolicy.topology import TOPOLOGIES, select
from learner.placement import parse_placement

address, out_dir, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
_, cfg = build("configs/sim_franka_reach_sac.yaml", overrides + [f"train.out_dir={out_dir}"],
               address)
cluster = Cluster.connect(address)
placement = parse_placement(cfg.placement, cluster.num_slots, list(COMPONENTS))
name = select(cfg, placement)
topo = TOPOLOGIES.get(name)(cfg, cluster, placement)

def where(worker):
    return {
        "node": ray.get_runtime_context().get_node_id(),
        "version": int(getattr(getattr(worker, "collector", None), "version", -1)),
    }

def ask(group):
    return [ray.get(a.__ray_call__.remote(where)) for a in group.actors]

try:
    result = topo.train(None)
    learner = ask(topo.learner)
    # the learner has stopped pulling; drain the episode channel so the env workers keep
    # stepping (and syncing) until each holds the final published weights, or 120 s pass
    deadline = time.monotonic() + 120
    envs = ask(topo.envs)
    while any(e["version"] != result["weight_version"] for e in envs):
        if time.monotonic() > deadline:
            break
        try:
            topo.channel.get(timeout=1.0)
        except ChannelTimeout:
            pass
        envs = ask(topo.envs)
finally:
    topo.shutdown()
print(json.dumps({
    "topology": name,
    "learner": learner,
    "envs": envs,
    "weight_version": result["weight_version"],
    "history": [
        {"env_steps": r["env_steps"], "weight_version": r["weight_version"]}
        for r in result["history"]
    ],
}))
"""


@pytest.fixture
def fleet_nodes(monkeypatch):
    """Node A (head, ``learner_node``), B and C (``fleet:env``), one CPU each; node ids by name."""
    from ray.cluster_utils import Cluster

    # the cluster's workers inherit this: three one-CPU nodes on a small host share its cores
    monkeypatch.setenv("RLINF_PIN_CPUS", "0")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            "resources": {"learner_node": 1},
        },
    )
    b = cluster.add_node(num_cpus=1, resources={"fleet:env": 1})
    c = cluster.add_node(num_cpus=1, resources={"fleet:env": 1})
    cluster.wait_for_nodes()
    try:
        yield cluster.address, {"A": cluster.head_node.node_id, "B": b.node_id, "C": c.node_id}
    finally:
        cluster.shutdown()


@pytest.mark.ray
@pytest.mark.sim
def test_learner_and_env_workers_run_where_the_placement_names(fleet_nodes, tmp_path):
    address, nodes = fleet_nodes
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled", RLINF_PIN_CPUS="0")
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, address, str(tmp_path / "run"), json.dumps(OVERRIDES)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["topology"] == "async"

    # where each actor ran: the learner on A, one env worker on each of B and C
    assert [w["node"] for w in out["learner"]] == [nodes["A"]], (out, nodes)
    assert sorted(w["node"] for w in out["envs"]) == sorted([nodes["B"], nodes["C"]]), (out, nodes)

    # training iterations completed, and the learner kept publishing new weights
    history = out["history"]
    assert len(history) >= 2 and history[-1]["env_steps"] >= 200, history
    assert history[-1]["weight_version"] > history[0]["weight_version"] >= 1, history

    # the weights reached both env workers' policies: each holds the final published version
    # (version 1 is the learner's untrained start; the last is after every update)
    assert out["weight_version"] > 1
    assert [w["version"] for w in out["envs"]] == [out["weight_version"]] * 2, out
