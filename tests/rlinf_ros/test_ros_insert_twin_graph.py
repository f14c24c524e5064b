"""Over real DDS: the insert twin graph (robot node with the ``mujoco_franka/insert`` scene and an
``ee_impedance`` arm, policy client without a server, the scripted inserter driving every tick,
task node) -- the scripted human inserts the peg and the task node, relaying the scene's verdict
(the simulator's insertion-depth test), judges the episodes a success.

The graph runs on the robot node's simulated clock at a fifth of real time (``use_sim_time``,
``robot.sim_clock``): an episode's 60 steps are 3 simulated seconds however loaded the machine,
and the other nodes get five times the headroom to answer each control step.

In the slow tier (``make test-slow``), not ``make test``: with CPU hogs beside it the scripted human
inserted fewer than 2 of 3 (at half and at a fifth of real time), where it passes on a quiet
machine. The impedance arm runs in real time, not lock-step (lock-step steps joint targets), so
this test cannot yet be made independent of load; ``test_ros_insert_twin.py`` checks the twin's
state, physics, reward and scripted human without DDS, in ``make test``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mujoco", reason="needs the sim extra")

from ros_procs import ROOT, Procs

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.slow]


def test_scripted_inserter_inserts_the_peg_on_the_twin(tmp_path: Path, ros_domain_id: int) -> None:
    episodes = 3
    cfg = yaml.safe_load((ROOT / "configs/ros_sim_franka_insert.yaml").read_text())
    cfg["use_sim_time"] = True
    cfg["robot"]["sim_clock"] = True
    cfg["robot"]["real_time_factor"] = 0.2
    cfg["policy_client"]["server_url"] = ""  # teleop only: no policy server
    cfg["task"].update(
        episodes=episodes, results_path=str(tmp_path / "episodes.json"), warmup_s=1.0
    )
    cfg["teleop"] = {
        "enabled": True,
        "device": "scripted",
        "always_intervene": True,
        "script": {"task": "insert"},
    }
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(cfg))
    procs = Procs(tmp_path)
    try:
        for kind in ("robot", "policy_client", "teleop", "task"):
            procs.start_node(kind, path)
        deadline = time.time() + 120
        while time.time() < deadline and not (tmp_path / "episodes.json").exists():
            assert all(p.poll() is None for p in procs.procs.values()), procs.logs()
            time.sleep(0.5)
        assert (tmp_path / "episodes.json").exists(), procs.logs()
    finally:
        codes = procs.stop_all()
    assert codes == dict.fromkeys(codes, 0), f"{codes}\n{procs.logs()}"
    results = json.loads((tmp_path / "episodes.json").read_text())
    assert results["episodes"] == episodes, results
    # the simulator's verdict: 15 mm deep in the hole (the scripted human fails about 1 in 10)
    assert results["successes"] >= 2, results
    ok = [r for r in results["results"] if r["success"]]
    assert all(1 < r["steps"] <= 60 for r in ok), results  # from above the fixture: several steps
