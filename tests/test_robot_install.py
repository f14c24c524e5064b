"""A robot PC installs ``rlinf-ros[robot]`` and runs its ROS 2 graph without torch or Ray.

Why a fresh venv: the development venv has every extra, so an accidental ``import torch`` on
the robot path would pass every other test. Here a venv without system site-packages gets only
``pip install -e '.[robot]'``; torch and Ray must be absent, the robot-path modules must import,
and a robot node (numpy ``kinematic`` arm) + policy-client node + policy server, all running in
that venv, must close the loop over real DDS. The venv is built once per pytest session
(about 20-30 s here; its duration is logged).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="the in-test probe needs the robot extra in this venv")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "rlinf_ros"))
from ros_procs import Probe, free_port  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ros, pytest.mark.timeout(420)]
log = logging.getLogger(__name__)

ROBOT_MODULES = [
    "rlinf_ros.nodes.robot",
    "rlinf_ros.nodes.camera",
    "rlinf_ros.nodes.policy_client",
    "rlinf_ros.policy_loop",
    "rlinf_ros.graph",
    "rlinf_ros.launch_support",
    "policy_server.client",
    "policy_server.messages",
    "rlinf_contracts.wire",
    "rlinf_contracts.config",
    "robot_drivers.factory",
    "robot_drivers.sim_arm",
    "robot_drivers.cameras",
    "robot_drivers.libfranka_arm",
]
IMPORT_CHECK = textwrap.dedent("""
    import importlib, json, sys
    absent = []
    for name in ("torch", "ray"):
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            absent.append(name)
    for name in sys.argv[1:]:
        importlib.import_module(name)
    heavy = sorted(m for m in ("torch", "ray", "safetensors", "zarr", "mujoco") if m in sys.modules)
    print(json.dumps({"absent": absent, "heavy_loaded": heavy, "prefix": sys.prefix}))
""")


def _clean_env() -> dict[str, str]:
    """This process's environment minus whatever would leak the development venv into the new
    one."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p
    )
    return {**env, "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="session")
def robot_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Python of a fresh venv with ``rlinf-ros[robot]`` (editable), built once per session."""
    venv = tmp_path_factory.mktemp("robot_install") / "venv"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    out = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            "-e",
            f"{ROOT}[robot]",
        ],
        cwd=venv.parent,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, (
        f"pip install -e '.[robot]' failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    )
    log.warning(
        "fresh robot venv: venv + pip install -e '.[robot]' took %.1f s", time.monotonic() - t0
    )
    return python


def test_robot_install_has_no_torch_or_ray_and_imports_the_robot_path(robot_python: Path) -> None:
    out = subprocess.run(
        [str(robot_python), "-c", IMPORT_CHECK, *ROBOT_MODULES],
        cwd=robot_python.parents[2],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["prefix"] == str(robot_python.parents[1])  # really the fresh venv
    assert report["absent"] == ["torch", "ray"], report
    assert report["heavy_loaded"] == [], report


def _graph_config(tmp_path: Path, port: int) -> Path:
    cfg = {
        "robot": {
            "arms": [{"name": "panda", "backend": "kinematic", "command_period_s": 0.01}],
            "driver_hz": 100,
            "publish_hz": 50,
        },
        "policy_client": {
            "server_url": f"ws://127.0.0.1:{port}",
            "cameras": {},
            "control_hz": 10,
            "reconnect_s": 0.3,
        },
    }
    path = tmp_path / "robot_pc.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _stop(procs: dict[str, subprocess.Popen]) -> dict[str, int | None]:
    for p in procs.values():
        p.terminate()
    codes: dict[str, int | None] = {}
    for name, p in procs.items():
        try:
            codes[name] = p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            codes[name] = p.wait(timeout=5) and None
    return codes


def test_robot_install_closes_the_loop_over_dds(
    robot_python: Path, tmp_path: Path, ros_domain_id: int
) -> None:
    """Server, robot node and policy client all run in the robot venv; commands reach the arm."""
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    port = free_port()
    config = _graph_config(tmp_path, port)
    env = _clean_env()
    procs: dict[str, subprocess.Popen] = {}

    def start(name: str, args: list[str]) -> None:
        with open(tmp_path / f"{name}.log", "wb") as f:
            procs[name] = subprocess.Popen(
                [str(robot_python), *args],
                cwd=tmp_path,
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
            )

    def logs() -> str:
        return "\n".join(
            f"==== {p.name}\n{p.read_text(errors='replace')[-2000:]}"
            for p in tmp_path.glob("*.log")
        )

    probe = Probe("install_probe")
    try:
        start(
            "server", [str(ROOT / "tests/rlinf_ros/scripted_policy_server.py"), "--port", str(port)]
        )
        for kind in ("robot", "policy_client"):
            start(kind, ["-m", f"rlinf_ros.nodes.{kind}", "--config", str(config)])
        status = probe.record(String, "policy_client/status", lambda m: json.loads(m.data))
        joints = probe.record(JointState, "joint_states", lambda m: np.array(m.position[:7]))
        commands = probe.record(
            JointTrajectory,
            "joint_trajectory_controller/joint_trajectory",
            lambda m: m.header.stamp.sec,
        )
        # the probe may discover the command topic after the client's first commands (DDS discovery
        # under load), so wait for what the probe itself has seen, not only the client's own count
        probe.wait_for(
            lambda: (
                (
                    status
                    and status[-1][1]["policy_steps"] >= 20
                    and len(joints) >= 100
                    and len(commands) >= 15
                )
                or any(p.poll() is not None for p in procs.values())
            ),
            90,
            "20 policy steps and 15 commands seen from the robot-install graph",
        )
        exited = {n: p.returncode for n, p in procs.items() if p.poll() is not None}
        assert not exited, f"processes exited early: {exited}"
        assert status[-1][1]["connected"] and status[-1][1]["failures"] == 0, status[-1][1]
        assert len(commands) >= 15 and all(
            sec > 0 for _, sec in commands
        )  # stamped commands flowed
        q = np.array([v for _, v in joints])
        assert float(np.ptp(q, axis=0).max()) > 0.02, "the arm did not follow the policy's commands"
    except AssertionError as e:
        raise AssertionError(f"{e}\n{logs()}") from None
    finally:
        probe.close()
        codes = _stop(procs)
    assert codes["robot"] == 0 and codes["policy_client"] == 0, (codes, logs())
