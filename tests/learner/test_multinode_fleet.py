"""A fleet on a real three-node Ray cluster on one host, placed by the placement grammar alone:
the learner on node A, and on nodes B and C either two env workers (simulated fleet) or the
robot sites' two policy servers (robots streaming to the learner's ingest).

Node A offers ``learner_node``, B and C one unit each of ``fleet:env`` and ``fleet:site`` (the
labels every robot PC of a fleet would offer). ``learner,replay: 0@learner_node`` pins the
off-policy learner to A; ``env: 1-2@fleet:env`` (or ``server: 1-2@fleet:site``) asks for two
processes each needing one unit, so Ray must put one on B and one on C.

- Env workers: the off-policy ``async`` topology runs a couple of iterations of SAC on
  ``mujoco_franka/reach`` (configs/sim_franka_reach_sac.yaml, shrunk): the env workers collect
  with the weights the learner publishes.
- Policy servers: the ``remote`` topology on ``toy/point_reach``; the learner starts one policy
  server per ``server`` slot serving its initial actor, two replaying robots
  (``rlinf_ros.fleet``) stream to its ingest, and every update is pushed to both servers.

A driver process (as ``rlinf train --ray-address`` would be) builds the config through the CLI's
checks, trains, and asks each live actor, through Ray's runtime context, which node it runs on
(the placed servers report theirs in ``<out_dir>/ingest.json``) and which weights it holds.

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


@pytest.fixture(scope="module")
def fleet_nodes():
    """Node A (head, ``learner_node``), B and C (``fleet:env``, ``fleet:site``), one CPU each;
    node ids by name. One cluster for the module's tests, as one fleet's machines would host run
    after run (each test's driver ends its actors, giving their resources back)."""
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as patch:
        # the cluster's workers inherit this: three one-CPU nodes on a small host share its cores
        patch.setenv("RLINF_PIN_CPUS", "0")
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "resources": {"learner_node": 1},
            },
        )
        b = cluster.add_node(num_cpus=1, resources={"fleet:env": 1, "fleet:site": 1})
        c = cluster.add_node(num_cpus=1, resources={"fleet:env": 1, "fleet:site": 1})
        cluster.wait_for_nodes()
        try:
            yield cluster.address, {"A": cluster.head_node.node_id, "B": b.node_id, "C": c.node_id}
        finally:
            cluster.shutdown()


def _drive(script: str, *args: str) -> dict:
    """Run a driver process (as ``rlinf train --ray-address`` would be) on the cluster; its last
    stdout line, as JSON."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled", RLINF_PIN_CPUS="0")
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.ray
@pytest.mark.sim
def test_learner_and_env_workers_run_where_the_placement_names(fleet_nodes, tmp_path):
    address, nodes = fleet_nodes
    out = _drive(DRIVER, address, str(tmp_path / "run"), json.dumps(OVERRIDES))
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


SECRET = "fleet-site-weights-and-ingest-token-0123"
SERVED_CONFIG = {
    "runner": "offpolicy",
    "name": "fleet_servers",
    "seed": 0,
    "placement": {
        "learner,replay": "0@learner_node",
        "env": "0@learner_node",  # robots are the env: the remote learner ignores it
        "server": "1-2@fleet:site",
    },
    "env": {"name": "toy/point_reach", "num_envs": 2},
    "model": {"hidden": [32, 32], "critic_hidden": [32, 32]},
    "algorithm": {"name": "sac", "batch_size": 16, "utd_ratio": 1.0},
    "train": {
        "env_steps": 100,
        "warmup_steps": 0,
        "learning_starts": 20,
        "log_every": 50,
        "progress": False,
        "tensorboard": False,
        "final_eval": False,
    },
    "ingest": {"enabled": True, "host": "127.0.0.1", "port": 0, "reward": "stream"},
    "push": {"every_updates": 7},  # the final actor is pushed at the end whatever this says
    "servers": {"deterministic": True},  # so actions compare exactly with the final actor
}

# the driver: build and start the remote topology, stream two robots, then ask the servers
SERVED_DRIVER = """
import json, sys, time
from pathlib import Path
import numpy as np
import ray
from learner.cluster import Cluster
from learner.offpolicy.config import COMPONENTS, OPTIONAL
from learner.offpolicy.topology import TOPOLOGIES, select
from learner.placement import parse_placement
from learner.serving import load_served_checkpoint
from policy_server.client import PolicyClient
from rlinf_cli.train import build
from rlinf_cli.wiring import plug_in
from rlinf_contracts.episode import StepLayout
from rlinf_ros.fleet import Fleet, FleetConfig, synthetic_store
from rlinf_ros.streaming import StreamerConfig

address, config, out_dir, token = sys.argv[1:5]
_, cfg = build(config, [], address)
plug_in()
cluster = Cluster.connect(address)
placement = parse_placement(cfg.placement, cluster.num_slots, list(COMPONENTS), OPTIONAL)
name = select(cfg, placement)
topo = TOPOLOGIES.get(name)(cfg, cluster, placement)  # initial actor, servers, ingest: all up
info = json.loads((Path(out_dir) / "ingest.json").read_text())
obs = np.linspace(-1.0, 1.0, 6).astype(np.float32)

def node(worker):
    return ray.get_runtime_context().get_node_id()

def ask(url):
    with PolicyClient(url, timeout_s=30) as client:
        out = client.infer({"state": obs})
    return int(out["weight_version"]), np.asarray(out["actions"], np.float32)

first = [ask(s["url"])[0] for s in info["servers"]]  # no robot yet, no push: the initial actor
recorded = synthetic_store(Path(out_dir + "-recorded"), 3, 20, StepLayout(6, 2))
stream = StreamerConfig(url=info["ingest_url"], window=16, batch=4, backoff_s=0.05)
fleet = Fleet.from_store(
    FleetConfig(robots=2, hz=100.0, spool_root=out_dir + "-spool", stream=stream), recorded, token
).start()
try:
    result = topo.train(None)
    learner = [ray.get(a.__ray_call__.remote(node)) for a in topo.learner.actors]
    final, _ = load_served_checkpoint(result["checkpoint"], deterministic=True)
    want = final.infer({"state": obs[None]})["actions"][0]
    servers = []
    for row, version0 in zip(info["servers"], first):
        deadline = time.monotonic() + 60  # the last push may still be on its way
        while True:
            version, got = ask(row["url"])
            diff = float(np.abs(got - want).max())
            if diff <= 1e-5 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        servers.append({**row, "first_version": version0, "version": version, "diff": diff})
finally:
    fleet.stop()
    topo.shutdown()
print(json.dumps({
    "topology": name,
    "learner": learner,
    "servers": servers,
    "push_urls": info["push_urls"],
    "env_steps": result["counters"]["env_steps"],
}))
"""


@pytest.mark.ray
def test_policy_servers_run_where_the_placement_names_and_serve_the_pushed_weights(
    fleet_nodes, tmp_path
):
    import yaml

    address, nodes = fleet_nodes
    token = tmp_path / "token"
    token.write_text(SECRET)
    config = json.loads(json.dumps(SERVED_CONFIG))
    config["train"]["out_dir"] = str(tmp_path / "run")
    config["ingest"]["token_file"] = config["push"]["token_file"] = str(token)
    path = tmp_path / "fleet_servers.yaml"
    path.write_text(yaml.safe_dump(config))
    out = _drive(SERVED_DRIVER, address, str(path), config["train"]["out_dir"], SECRET)
    assert out["topology"] == "remote" and out["env_steps"] >= 100, out

    # where each actor ran: the learner on A, one policy server on each of B and C
    assert out["learner"] == [nodes["A"]], (out, nodes)
    servers = out["servers"]
    assert sorted(s["node_id"] for s in servers) == sorted([nodes["B"], nodes["C"]]), (out, nodes)
    assert sorted(out["push_urls"]) == sorted(s["url"] for s in servers)  # both were pushed to

    # each served the initial actor first, then took pushes up to the learner's final actor
    for s in servers:
        assert s["first_version"] == 0 and s["version"] > 0, s
        assert s["diff"] <= 1e-5, s
