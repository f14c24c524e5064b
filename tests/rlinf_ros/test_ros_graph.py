"""`rlinf ros up` graph, launch files and RosRobotEnv over a real robot-node process."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import ROOT, Probe, Procs

from rlinf_contracts.config import ConfigError
from rlinf_ros.config import load_graph_config
from rlinf_ros.graph import node_commands
from robot_drivers.kinematics import forward_kinematics
from robot_drivers.types import PANDA_HOME

CONFIGS = ["ros_sim_franka_camera", "ros_real_franka", "ros_dual_arm"]


@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_configs_load_and_list_their_nodes(name: str) -> None:
    cfg = load_graph_config(ROOT / f"configs/{name}.yaml")
    cmds = node_commands(cfg, f"configs/{name}.yaml", ["policy_client.control_hz=5"])
    kinds = [c.kind for c in cmds]
    # robot first, the policy client after the cameras (a task node, if any, after it)
    assert kinds[0] == "robot" and "camera" in kinds
    assert kinds.index("policy_client") > max(i for i, k in enumerate(kinds) if k == "camera")
    for c in cmds:
        assert (
            c.argv[1:3] == ["-m", f"rlinf_ros.nodes.{c.kind}"]
            and c.argv[-1] == "policy_client.control_hz=5"
        )


def test_sim_twin_config_runs_the_reach_spec_with_a_task_node() -> None:
    cfg = load_graph_config(ROOT / "configs/ros_sim_franka.yaml")
    assert [c.kind for c in node_commands(cfg, "configs/ros_sim_franka.yaml")] == [
        "robot",
        "policy_client",
        "task",
    ]
    spec = cfg.policy_client.spec()
    assert spec.describe().startswith("state[30] = ee_pos(3) ee_rot6d(6) joint_pos(7)")
    assert spec.control_hz == 20  # the training rate, part of the spec
    assert (
        cfg.policy_client.rate_hz == cfg.task.control_hz == 10
    )  # the twin's loop rate (see the YAML)


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="robot.driver_hzz"):
        load_graph_config(ROOT / "configs/ros_sim_franka.yaml", ["+robot.driver_hzz=3"])
    bad = tmp_path / "dup.yaml"
    bad.write_text(
        yaml.safe_dump({"robot": {"arms": [{"joint_prefix": "a_"}, {"joint_prefix": "a_"}]}})
    )
    with pytest.raises(ConfigError, match="joint_prefix"):
        load_graph_config(bad)
    with pytest.raises(ValueError, match="--only"):
        node_commands(
            load_graph_config(ROOT / "configs/ros_sim_franka.yaml"), "x.yaml", only=["nope"]
        )


@pytest.mark.parametrize("launch_file", ["sim_robot", "real_franka", "dual_arm"])
def test_launch_files_load_and_point_to_rlinf_ros_up_without_ros2_launch(launch_file: str) -> None:
    spec = importlib.util.spec_from_file_location(
        launch_file, ROOT / f"launch/{launch_file}.launch.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:  # the repo's own launch/ folder is a namespace package named "launch": look deeper
        has_launch = importlib.util.find_spec("launch.actions") is not None
    except ModuleNotFoundError:
        has_launch = False
    if not has_launch:
        with pytest.raises(RuntimeError, match="rlinf ros up"):
            mod.generate_launch_description()
    else:  # a machine with ROS 2 launch: the description builds
        assert mod.generate_launch_description() is not None


def _env_config(tmp_path: Path) -> Path:
    cfg = {
        "robot": {
            "arms": [{"name": "panda", "backend": "kinematic", "command_period_s": 0.01}],
            "driver_hz": 100,
            "publish_hz": 50,
        },
        "policy_client": {"cameras": {}, "control_hz": 10},
        "env": {
            "reward": "ee_distance",
            "goal_position": [0.4, 0.0, 0.487],
            "max_episode_steps": 3,
            "step_timeout_s": 5.0,
            "home_timeout_s": 15.0,
        },
    }
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.ros
def test_ros_robot_env_resets_steps_and_auto_resets(tmp_path: Path, ros_domain_id: int) -> None:
    from rlinf_contracts.env_registry import make_env

    path = _env_config(tmp_path)
    procs = Procs(tmp_path)
    env = None
    try:
        procs.start_node("robot", path)
        env = make_env("ros/franka", num_envs=1, config=str(path))
        assert env.spec.state_dim == 8 and env.spec.action_dim == 8 and env.spec.cameras == {}
        obs = env.reset(seed=0)
        assert obs["state"].shape == (1, 8) and np.allclose(
            obs["state"][0, :7], PANDA_HOME, atol=0.02
        )
        action = np.zeros((1, 8), np.float32)
        action[0, 0] = 1.0  # +0.05 rad on joint 1 per step
        action[0, 7] = 1.0
        t0 = time.time()
        obs, reward, term, trunc, info = env.step(action)
        assert time.time() - t0 >= 0.09  # paced at the 10 Hz control rate
        assert (
            PANDA_HOME[0] + 0.01 < obs["state"][0, 0] < PANDA_HOME[0] + 0.06
        )  # moving towards the target
        ee = forward_kinematics(obs["state"][0, :7].astype(np.float64))[:3, 3]
        assert reward[0] == pytest.approx(-np.linalg.norm(ee - [0.4, 0.0, 0.487]), abs=0.01)
        later, _ = env._wait_obs(time.time() + 0.3, 5.0)
        assert later["state"][0, 0] == pytest.approx(
            PANDA_HOME[0] + 0.05, abs=0.003
        )  # ... and reaches it
        assert later["state"][0, 7] == pytest.approx(0.08, abs=1e-3)  # gripper open (action +1)
        assert not term[0] and not trunc[0] and info["valid_steps"].all()
        obs, reward, term, trunc, info = env.step(
            np.repeat(action[:, None], 2, axis=1)
        )  # chunk of 2
        assert reward.shape == (1, 2) and trunc[0]  # 3 steps = max_episode_steps
        assert PANDA_HOME[0] + 0.1 < info["final_observation"]["state"][0, 0] < PANDA_HOME[0] + 0.16
        assert np.allclose(obs["state"][0, :7], PANDA_HOME, atol=0.02)  # auto-reset went home
        assert info["episode_length"][0] == 3
        with pytest.raises(ValueError, match="num_envs=2"):
            make_env("ros/franka", num_envs=2, config=str(path))
    finally:
        if env is not None:
            env.close()
        codes = procs.stop_all()
    assert codes == {"robot": 0}, procs.logs()


@pytest.mark.ros
@pytest.mark.sim
def test_rlinf_ros_up_starts_the_graph_and_stops_it_on_sigint(
    tmp_path: Path, ros_domain_id: int
) -> None:
    from sensor_msgs.msg import Image, JointState

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlinf_cli.main",
            "ros",
            "up",
            "configs/ros_sim_franka_camera.yaml",
            "policy_client.control_hz=5",
            "--only",
            "robot",
            "camera",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    probe = Probe()
    try:
        joints = probe.record(JointState, "joint_states", lambda m: list(m.name))
        images = probe.record(
            Image, "camera/camera/color/image_raw", lambda m: (m.encoding, m.width, m.height)
        )
        probe.wait_for(
            lambda: (joints and images) or proc.poll() is not None,
            90,
            "joint_states and images from `rlinf ros up`",
        )
        if proc.poll() is not None:
            pytest.fail(
                "`rlinf ros up` exited early "
                f"({proc.returncode}):\n{proc.communicate()[0].decode()}"
            )
        assert joints[-1][1] == [f"panda_joint{i}" for i in range(1, 8)]
        assert images[-1][1] == ("rgb8", 224, 224)
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=90)[0].decode(errors="replace")
        assert proc.returncode == 0, out
        assert "graph stopped: {'camera': 0, 'robot': 0}" in out
    finally:
        probe.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_node_that_cannot_start_says_why_and_exits_2(ros_domain_id: int) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_ros.nodes.camera",
            "--config",
            "configs/ros_sim_franka_camera.yaml",
            "--name",
            "nope",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "no camera named 'nope' in the config; cameras: ['camera']" in out.stderr


def test_graph_stops_everything_when_a_node_dies(tmp_path: Path, ros_domain_id: int) -> None:
    from rlinf_ros.graph import up

    if importlib.util.find_spec("pyrealsense2") is not None:
        pytest.skip("a RealSense SDK is installed: the failing camera would be a real one")
    cfg = {
        "robot": {"arms": [{"backend": "kinematic"}]},
        "cameras": [{"name": "wrist", "camera": {"backend": "realsense"}}],
    }  # no pyrealsense2 here
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(cfg))
    # the camera exits 2 -> the graph stops the robot too and returns 1 (a graph that ran out its
    # duration would return 0)
    assert up(path, duration_s=300) == 1
