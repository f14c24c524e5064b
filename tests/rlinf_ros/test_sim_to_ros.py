"""Train in simulation, deploy over ROS 2: the README's walk, as separate processes over real DDS.

``rlinf train configs/sim_franka_reach_ppo.yaml`` (the ``make demo`` config), then
``rlinf serve --checkpoint RUN`` and ``rlinf ros up configs/ros_sim_franka.yaml``: the robot node
runs the MuJoCo Panda in real time, the task node scores 20 reach episodes, the policy client
builds the simulator's 30-D state from franka_ros2 topics and decodes ``ee_delta`` actions with
the simulator's control law. The ROS success rate must be within 0.1 of the same checkpoint's
success in the simulator's own eval.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mujoco", reason="needs the sim extra")
pytest.importorskip("torch", reason="needs the learner extra")

from ros_procs import ROOT, Procs, free_port  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.slow, pytest.mark.timeout(900)]
EPISODES = 20


@pytest.fixture(scope="module")
def reach_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's PPO run (same config, same seed), trained by the embodied runner."""
    out = tmp_path_factory.mktemp("reach_run")
    proc = subprocess.run([sys.executable, "-m", "rlinf_cli.main", "train", "configs/sim_franka_reach_ppo.yaml",
                           f"train.out_dir={out}", "eval.video=false", "eval.episodes=100"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_a_checkpoint_trained_in_sim_drives_the_ros_twin(reach_run: Path, tmp_path: Path, ros_domain_id: int) -> None:
    sim_success = json.loads((reach_run / "metrics.json").read_text())["final"]["eval"]["id"]["success_rate"]
    port = free_port()
    results = tmp_path / "episodes.json"
    procs = Procs(tmp_path)
    try:
        procs.start("serve", ["-m", "rlinf_cli.main", "serve", "--checkpoint", str(reach_run),
                              "--host", "127.0.0.1", "--port", str(port)])
        graph = procs.start("ros_up", ["-m", "rlinf_cli.main", "ros", "up", "configs/ros_sim_franka.yaml",
                                       f"policy_client.server_url=ws://127.0.0.1:{port}",
                                       f"task.episodes={EPISODES}", f"task.results_path={results}"])
        deadline = time.time() + 600
        while not results.exists():
            assert graph.poll() is None, f"`rlinf ros up` exited early:\n{procs.logs()}"
            assert time.time() < deadline, f"no episode results after 600 s:\n{procs.logs()}"
            time.sleep(1.0)
        summary = json.loads(results.read_text())
        graph.send_signal(signal.SIGINT)
        assert graph.wait(timeout=60) == 0, procs.logs()
    finally:
        procs.stop_all()
    logs = procs.logs()
    assert summary["episodes"] == EPISODES
    assert abs(summary["success_rate"] - sim_success) <= 0.1, (
        f"ROS twin success {summary['success_rate']:.2f} vs simulator {sim_success:.2f}: {summary['results']}\n{logs}")
    assert "refused" not in logs and "cannot build the observation" not in logs
