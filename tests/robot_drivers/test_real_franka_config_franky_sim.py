"""``rlinf ros up configs/ros_real_franka.yaml`` as a user runs it, with franky-sim as the robot.

Why: the libfranka backend's own tests (test_libfranka_franky_sim.py) drive one ``FrankaArm``;
this one runs the shipped real-robot graph (robot node over libfranka, policy client, task node)
with the demo's reach policy served by ``rlinf serve``, changed only by the overrides
docs/real_franka.md lists for franky-sim (:data:`FRANKY_SIM_OVERRIDES`, each with its reason
there). A checkpoint is trained here (the demo config, 100 iterations: reaches in simulation)
so the test can ask for more than plumbing: the task node scores most episodes a success (the
end effector within ``task.success_radius`` of the goal), as the simulator does -- which needs
the simulator's end-effector frame, no gripper stalls and a control rate the arm can follow
(docs/real_franka.md). Measured before those: 0 of 10.
franky-sim's own state, read over libfranka before and after the graph ran, shows that the
robot node's ``joint_states`` are franky-sim's joints and that the commanded targets moved them.
"""

from __future__ import annotations

import ast
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.robot_drivers.franky_sim import ROOT, FrankySim, franky_sim  # noqa: F401 -- fixture

CONFIG = "configs/ros_real_franka.yaml"
# what docs/real_franka.md tells a user to add for franky-sim (the address is the fixture's)
FRANKY_SIM_OVERRIDES = ["robot.arms[0].realtime=ignore", "cameras=[]"]
TRAIN_ITERATIONS = 100  # the demo config reaches ~0.98 success in simulation by then
EPISODES = 5
MIN_SUCCESSES = 3  # most of them (measured: 6-10 of 10 on a loaded 2-core machine)
ARM_JOINTS = [f"fr3_joint{i}" for i in range(1, 8)]


def test_the_real_robot_config_runs_the_demo_policy_spec() -> None:
    """The shipped file stays a real-robot config (PREEMPT_RT enforced, a RealSense camera)
    whose robot spec is the reach checkpoint's, with a task node as the goal source."""
    pytest.importorskip("mujoco", reason="needs the sim extra")
    from rlinf_contracts.env_registry import make_env
    from rlinf_ros.config import load_graph_config

    cfg = load_graph_config(ROOT / CONFIG)
    arm = cfg.robot.arms[0]
    assert arm.backend == "libfranka" and arm.realtime == "enforce"
    assert [c.camera.backend for c in cfg.cameras] == ["realsense"]
    assert cfg.policy_client.spec() == make_env("mujoco_franka/reach", 1).spec.robot
    assert cfg.task.enabled and cfg.task.reset == "trajectory"
    assert cfg.task.joint_prefix == arm.joint_prefix and cfg.policy_client.joint_prefixes == [
        arm.joint_prefix
    ]
    assert list(cfg.task.home) == pytest.approx(list(cfg.policy_client.spec().home), abs=1e-5)
    docs = (ROOT / "docs/real_franka.md").read_text()
    for override in FRANKY_SIM_OVERRIDES:
        assert override in docs, f"docs/real_franka.md does not explain the override {override}"


# ---- the graph against franky-sim (slow tier) ---------------------------------------------------
@pytest.fixture(scope="module")
def reach_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's PPO run (same config and seed), shortened: `make demo` without its budget."""
    pytest.importorskip("torch", reason="needs the learner extra")
    out = tmp_path_factory.mktemp("reach_run")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_cli.main",
            "train",
            "configs/sim_franka_reach_ppo.yaml",
            f"train.out_dir={out}",
            f"train.iterations={TRAIN_ITERATIONS}",
            f"train.checkpoint_every={TRAIN_ITERATIONS}",
            "train.progress=false",
            "train.tensorboard=false",
            "eval.episodes=10",
            "eval.num_envs=10",
            "eval.video=false",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def franky_sim_joints(host: str) -> np.ndarray:
    """franky-sim's joints read over libfranka by a client of our own (the server takes one
    client at a time: call it while no robot node is connected)."""
    fr = pytest.importorskip("pylibfranka")
    robot = fr.Robot(host, fr.RealtimeConfig.kIgnore)
    try:
        return np.asarray(robot.read_once().q, dtype=np.float64)
    finally:
        del robot  # closes the connection for the next client


def xyz(msg: Any) -> np.ndarray:
    """A PoseStamped's position."""
    p = msg.pose.position
    return np.array([p.x, p.y, p.z])


def reached_goals(goals: list, poses: list, closes: list) -> list[tuple[float, float]]:
    """Per episode: (distance of the end effector from the goal when the goal came, closest
    distance before the episode closed), in m. ``goals`` and ``poses``: ``(t, xyz)`` from
    ``task/goal`` and the end-effector pose; ``closes``: ``(t, status)`` from ``task/status``,
    one per closed episode."""
    distinct: list[tuple[float, np.ndarray]] = []
    for t, g in goals:
        if not distinct or not np.allclose(distinct[-1][1], g):  # re-sent until the client runs
            distinct.append((t, g))
    closed = {s["episodes"]: t for t, s in closes}
    out = []
    for i, (t, g) in enumerate(distinct):
        t_end = closed.get(i + 1, float("inf"))
        d = [float(np.linalg.norm(p - g)) for tp, p in poses if t <= tp < t_end]
        if d:
            out.append((d[0], min(d)))
    return out


def wait_at_rest(last: Any, lock: Any, timeout: float = 60.0) -> np.ndarray:
    """The arm joints of ``last()`` (a joint name -> position map) once they stop changing:
    within 1 mrad over 0.5 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with lock:
            q0 = np.array([last()[n] for n in ARM_JOINTS])
        time.sleep(0.5)
        with lock:
            q1 = np.array([last()[n] for n in ARM_JOINTS])
        if np.allclose(q0, q1, atol=1e-3):
            return q1
    raise AssertionError(f"the arm did not come to rest within {timeout:.0f} s")


@pytest.mark.ros
@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ros_up_drives_franky_sim_with_the_demo_policy(
    reach_run: Path,  # trained first: an idle franky-sim would take CPU from the training
    franky_sim: FrankySim,  # noqa: F811 -- the fixture above
    tmp_path: Path,
    ros_domain_id: int,
) -> None:
    pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from tests.rlinf_ros.ros_procs import Probe, Procs, free_port

    q_before = franky_sim_joints(franky_sim.host)
    port = free_port()
    procs = Procs(tmp_path)
    probe = None
    try:
        serve = procs.start(
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
                CONFIG,
                f"robot.arms[0].ip={franky_sim.host}",
                *FRANKY_SIM_OVERRIDES,
                f"policy_client.server_url=ws://127.0.0.1:{port}",
                "task.episodes=0",  # endless: this test ends the run with Ctrl-C, as a user does
            ],
        )
        probe = Probe()
        robot_state = probe.record(
            String, "franka_robot_state_broadcaster/robot_state", lambda m: json.loads(m.data)
        )
        joints = probe.record(
            JointState, "joint_states", lambda m: dict(zip(m.name, m.position, strict=True))
        )
        client = probe.record(String, "policy_client/status", lambda m: json.loads(m.data))
        task = probe.record(String, "task/status", lambda m: json.loads(m.data))
        goals = probe.record(PoseStamped, "task/goal", xyz)
        poses = probe.record(PoseStamped, "franka_robot_state_broadcaster/current_pose", xyz)

        def live(cond):  # a dead `ros up` (a node died) fails at once, with the logs
            def check() -> bool:
                assert graph.poll() is None, f"`rlinf ros up` exited:\n{procs.logs()}"
                return cond()

            return check

        probe.wait_for(
            live(
                lambda: (
                    bool(robot_state) and robot_state[-1][1]["arms"]["fr3"]["control"] == "position"
                )
            ),
            180,
            "the robot node on the libfranka backend (robot_state: position loop running)",
            procs,
        )
        fr3 = robot_state[-1][1]["arms"]["fr3"]
        assert fr3["errors"] == [] and fr3["mode"] in ("IDLE", "MOVE"), fr3
        probe.wait_for(
            live(lambda: bool(client) and client[-1][1]["policy_steps"] > 0),
            180,
            "the policy client acting on the server's actions",
            procs,
        )
        status = client[-1][1]
        assert status["connected"] and status["refused"] == "", status
        probe.wait_for(  # an episode: up to 40 s (100 steps at 2.5 Hz), its reset ~10-25 s
            live(lambda: bool(task) and task[-1][1]["episodes"] >= EPISODES),
            900,
            f"{EPISODES} reach episodes",
            procs,
        )
        with probe.lock:
            summary = task[-1][1]
            episodes = reached_goals(list(goals), list(poses), list(task))
        # the policy's commands moved the arm toward every goal, and reached most of them
        assert len(episodes) >= EPISODES, (episodes, summary)
        assert all(d_min < d0 - 0.01 for d0, d_min in episodes), (episodes, summary)
        assert summary["successes"] >= MIN_SUCCESSES, (episodes, summary)
        # the operator's e-stop: the arm holds where it is, so franky-sim's joints can be
        # compared with the last published ones once the graph is down
        ok, message = probe.call_trigger("estop")
        assert ok, message
        q_last = wait_at_rest(lambda: joints[-1][1], probe.lock)
        graph.send_signal(signal.SIGINT)  # Ctrl-C
        assert graph.wait(timeout=60) == 0, procs.logs()
        assert serve.poll() is None, procs.logs()
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0, procs.logs()
    finally:
        if probe is not None:
            probe.close()
        procs.stop_all()
    log = (tmp_path / "ros_up.log").read_text()
    stopped = re.search(r"graph stopped: (\{.*\})", log)
    assert stopped, log[-3000:]
    codes = ast.literal_eval(stopped.group(1))
    assert codes == {"task": 0, "policy_client": 0, "robot": 0}, log[-3000:]
    # franky-sim's own state: the joints the robot node published, moved from where they were
    q_after = franky_sim_joints(franky_sim.host)
    np.testing.assert_allclose(q_last, q_after, atol=5e-3)
    assert np.max(np.abs(q_after - q_before)) > 0.05, (q_before, q_after)
    print(
        f"franky-sim via {CONFIG}: {summary['successes']}/{summary['episodes']} episodes reached "
        f"the goal; per goal (start, closest) m: "
        f"{[(round(a, 3), round(b, 3)) for a, b in episodes]}"
    )
