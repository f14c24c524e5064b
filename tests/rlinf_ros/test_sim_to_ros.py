"""Train in simulation, deploy over ROS 2: the README's walk, as separate processes over real DDS.

``rlinf train configs/sim_franka_reach_ppo.yaml`` (the ``make demo`` config), then
``rlinf serve --checkpoint RUN`` and ``rlinf ros up configs/ros_sim_franka.yaml``: the robot node
runs the MuJoCo Panda, the task node scores 20 reach episodes, the policy client builds the
simulator's 30-D state from franka_ros2 topics and decodes ``ee_delta`` actions with the
simulator's control law. The ROS success rate must be within 0.1 of the same checkpoint's
success in the simulator's own eval.

Time: the graph runs on simulated time (``use_sim_time``, ``robot.sim_clock``, half real time),
not in lock-step. What this test claims is the deployment path a real robot takes: continuous
physics, a trajectory point ramped by the driver, a policy acting asynchronously on the newest
observation, an episode of ``max_steps`` control periods; lock-step replaces all of that with the
simulator's own step (and the reach twin keeps ``lockstep: false``, see docs/architecture.md).
On wall time a loaded machine let the physics run on while the client and task nodes fell behind
(episodes ran out of steps short of the goal); on the robot node's ``/clock`` a slow machine
slows the simulated world, so every node sees the same control periods however loaded it is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mujoco", reason="needs the sim extra")
pytest.importorskip("torch", reason="needs the learner extra")

from ros_procs import ROOT, Procs, free_port

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.slow, pytest.mark.timeout(1500)]
EPISODES = 20
# every node on the robot node's /clock; half real time leaves the other nodes CPU headroom
SIM_TIME = ["use_sim_time=true", "robot.sim_clock=true", "robot.real_time_factor=0.5"]


@pytest.fixture(scope="module")
def reach_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's PPO run (same config, same seed), trained by the embodied runner."""
    out = tmp_path_factory.mktemp("reach_run")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_cli.main",
            "train",
            "configs/sim_franka_reach_ppo.yaml",
            f"train.out_dir={out}",
            "eval.video=false",
            "eval.episodes=100",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_a_checkpoint_trained_in_sim_drives_the_ros_twin(
    reach_run: Path, tmp_path: Path, ros_domain_id: int
) -> None:
    sim_success = json.loads((reach_run / "metrics.json").read_text())["final"]["eval"]["id"][
        "success_rate"
    ]
    port = free_port()
    results = tmp_path / "episodes.json"
    procs = Procs(tmp_path)
    try:
        procs.start(
            "serve",
            [
                "-m",
                "rlinf_cli.main",
                "serve",
                "--checkpoint",
                str(reach_run),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
        )
        graph = procs.start(
            "ros_up",
            [
                "-m",
                "rlinf_cli.main",
                "ros",
                "up",
                "configs/ros_sim_franka.yaml",
                f"policy_client.server_url=ws://127.0.0.1:{port}",
                f"task.episodes={EPISODES}",
                f"task.results_path={results}",
                *SIM_TIME,
            ],
        )
        deadline = time.time() + 900  # a hang guard: 20 episodes take ~4 min at half real time
        while not results.exists():
            assert graph.poll() is None, f"`rlinf ros up` exited early:\n{procs.logs()}"
            assert time.time() < deadline, f"no episode results after 900 s:\n{procs.logs()}"
            time.sleep(1.0)
        summary = json.loads(results.read_text())
        # a finite task ends the run: `ros up` stops the graph by itself and returns 0
        assert graph.wait(timeout=60) == 0, procs.logs()
    finally:
        procs.stop_all()
    logs = procs.logs()
    assert summary["episodes"] == EPISODES
    assert abs(summary["success_rate"] - sim_success) <= 0.1, (
        f"ROS twin success {summary['success_rate']:.2f} vs simulator {sim_success:.2f}: "
        f"{summary['results']}\n{logs}"
    )
    assert "robot spec refused" not in logs and "cannot build the observation" not in logs
    print(
        f"ROS twin: {summary['successes']}/{summary['episodes']} reached; simulator eval "
        f"{sim_success:.2f}"
    )


def test_a_policy_trained_for_another_robot_is_refused_once(
    tmp_path: Path, ros_domain_id: int
) -> None:
    """The first policy client's failure, now: a joint-delta ROS client meets a server whose
    policy expects the 30-D reach state. One refusal naming both layouts, status ``refused``, no
    reconnect loop."""
    from ros_procs import Probe
    from std_msgs.msg import String

    port = free_port()
    serve_cfg = tmp_path / "serve.yaml"
    serve_cfg.write_text(
        "policy:\n  name: mlp\n  spec: {state_dim: 30, action_dim: 7}\n  kwargs: {hidden: [8]}\n"
    )
    procs = Procs(tmp_path)
    probe = None
    try:
        procs.start(
            "serve",
            [
                "-m",
                "rlinf_cli.main",
                "serve",
                "--config",
                str(serve_cfg),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
        )
        graph = yaml.safe_load((ROOT / "configs/ros_sim_franka_camera.yaml").read_text())
        graph["cameras"], graph["policy_client"]["cameras"] = [], {}  # no rendering needed here
        graph["policy_client"]["robot_spec"]["cameras"] = []
        graph["policy_client"].update(server_url=f"ws://127.0.0.1:{port}", reconnect_s=0.2)
        config = tmp_path / "graph.yaml"
        config.write_text(yaml.safe_dump(graph))
        procs.start_node("robot", config)
        procs.start_node("policy_client", config)
        probe = Probe()
        status = probe.record(String, "policy_client/status", lambda m: json.loads(m.data))
        probe.wait_for(lambda: status and status[-1][1]["refused"], 90, "a refused status", procs)
        time.sleep(3.0)  # ~15 reconnect periods: a retry loop would show up in the server log
        last = status[-1][1]
        assert (
            last["mode"] == "hold"
            and last["reason"] == "refused"
            and last["connects"] == 0
            and not last["connected"]
        )
        assert "state layout differs: state(30) vs joint_pos(7) gripper_width(1)" in last["refused"]
        assert "Policy: state[30]" in last["refused"] and "Robot: state[8]" in last["refused"]
    finally:
        if probe is not None:
            probe.close()
        procs.stop_all()
    server_log = (tmp_path / "serve.log").read_text()
    assert server_log.count("refused client") == 1, server_log
