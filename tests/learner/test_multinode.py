"""A real two-node Ray cluster on this machine: a head and a "robot PC" node offering the custom
resource ``robot:franka0``. ``rlinf train --ray-address`` (a separate process, as on a real
cluster) must put the env worker on the robot node by the placement grammar alone
(``env: 1@robot:franka0``). Rollout and actor ask for no custom resource: Ray keeps them near
the driver. With both nodes on one IP the driver may attach to either raylet, so the test only
asserts where the pinned env worker ran (on real machines the driver runs on the head).

Both nodes are separate raylet processes started by ``ray.cluster_utils.Cluster`` (each with
its own object store); the driver reaches them by the GCS address, as ``ray start`` nodes would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {
    "runner": "embodied",
    "name": "multinode",
    "placement": {"env": "1@robot:franka0", "rollout,actor": "0"},
    "env": {"name": "toy/point_reach", "num_envs": 4, "max_episode_steps": 10},
    "rollout": {"steps_per_iteration": 4, "pipeline_stages": 1, "channel_timeout": 240.0},
    "actor": {"epochs": 1, "minibatches": 1},
    "train": {"iterations": 2, "progress": False, "tensorboard": False, "final_eval": False},
}

# where each worker class ran, read from the GCS of the cluster (dead actors stay listed)
QUERY = """
import json, sys, ray
ray.init(address=sys.argv[1], namespace="rlinf", configure_logging=False, log_to_driver=False)
from ray._private import state
print(json.dumps([
    {"cls": a["ActorClassName"], "node": a["Address"]["NodeID"]} for a in state.actors().values()
]))
"""


@pytest.fixture
def two_nodes():
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False}
    )
    robot = cluster.add_node(num_cpus=1, resources={"robot:franka0": 1})
    cluster.wait_for_nodes()
    try:
        yield cluster.address, cluster.head_node.node_id, robot.node_id
    finally:
        cluster.shutdown()


@pytest.mark.ray
def test_env_worker_runs_on_the_robot_node_by_placement_alone(two_nodes, tmp_path):
    address, head_id, robot_id = two_nodes
    cfg = dict(CONFIG, train={**CONFIG["train"], "out_dir": str(tmp_path / "run")})
    path = tmp_path / "multinode.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled")
    train = subprocess.run(
        [sys.executable, "-m", "rlinf_cli.main", "train", str(path), "--ray-address", address],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    assert (tmp_path / "run" / "metrics.json").exists()
    query = subprocess.run(
        [sys.executable, "-c", QUERY, address],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert query.returncode == 0, query.stderr[-3000:]
    nodes: dict[str, set[str]] = {}
    for actor in json.loads(query.stdout.strip().splitlines()[-1]):
        nodes.setdefault(actor["cls"], set()).add(actor["node"])
    env_nodes = {n for cls, ns in nodes.items() if "EnvWorker" in cls for n in ns}
    assert env_nodes == {robot_id} and robot_id != head_id, nodes
    assert any("ActorWorker" in cls for cls in nodes) and any(
        "RolloutWorker" in cls for cls in nodes
    ), nodes


def test_a_pinned_component_needs_its_own_slots():
    from learner.placement import PlacementError, parse_placement

    p = parse_placement({"env": "0-1:2-3@robot:franka0", "rollout,actor": "0-1"}, num_slots=4)
    assert p["env"].resources == {"robot:franka0": 1.0} and p["env"].process_slots == [[2], [3]]
    assert "@robot:franka0" in p.describe()
    with pytest.raises(PlacementError, match="same slots but only one is pinned to robot:franka0"):
        parse_placement({"env": "0@robot:franka0", "rollout,actor": "0"}, num_slots=2)
    with pytest.raises(PlacementError, match="bad resource name"):
        parse_placement({"env": "0@", "rollout,actor": "1"}, num_slots=2)
