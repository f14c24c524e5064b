"""A VLA served by the policy server and driven over ROS 2: the instruction reaches the model.

Real processes and real DDS (sim robot node + sim camera node + policy client node) against an
in-process policy server serving a tiny random-weight small VLA (``learner.models.vla``, token
head, hashed instruction encoder): actions flow back to the arm, and the instruction the client
was configured with, then the one published on ``task/instruction``, arrive in the batch the
model sees; then the task node's per-episode instructions do.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mujoco", reason="needs the sim extra")

from ros_procs import ROOT, Probe, Procs

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.timeout(360)]

SPEC = {
    "state": [["joint_pos", 7], ["gripper_width", 1]],
    "action": {"control": "joint_delta", "dim": 8, "chunk": 2, "joint_scale": 0.05},
    "cameras": [["camera", 64, 64]],
    "uses_instruction": True,
}


class RecordingVla:
    """A tiny random small VLA as a served policy, recording every instruction it is given."""

    name = "tiny_vla"

    def __init__(self) -> None:
        import torch

        from learner.models.policy import PolicySpec
        from learner.models.vla import VLAPolicy
        from learner.serving import TorchPolicy
        from rlinf_contracts.spec import RobotSpec

        torch.manual_seed(0)
        spec = PolicySpec(state_dim=8, action_dim=8, chunk=2, cameras={"camera": (64, 64)})
        self.inner = TorchPolicy(
            VLAPolicy(
                spec,
                head="tokens",
                text_encoder="hash",
                hidden=[32],
                cnn_channels=(4, 4, 4),
                image_feat_dim=16,
            ),
            threads=1,
        )
        self.robot_spec = RobotSpec.from_dict(SPEC)
        self.instructions: list[str] = []
        self.actions: list[np.ndarray] = []
        self.lock = threading.Lock()

    def thread_init(self) -> None:
        self.inner.thread_init()

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        out = self.inner.infer(obs)
        with self.lock:
            self.instructions.extend(obs["instruction"])
            self.actions.append(out["actions"])
        return out


def _config(tmp_path: Path, port: int) -> Path:
    cfg = yaml.safe_load((ROOT / "configs/ros_sim_franka_camera.yaml").read_text())
    pc = cfg["policy_client"]
    pc["server_url"] = f"ws://127.0.0.1:{port}"
    pc["robot_spec"] = SPEC
    pc["instruction"] = "lift the red cube"
    pc["instruction_topic"] = "task/instruction"
    cam = cfg["cameras"][0]["camera"]
    cam.update(width=64, height=64, fps=10)
    cfg["task"] = {
        "enabled": True,
        "task": "reach",
        "episodes": 0,
        "max_steps": 8,
        "control_hz": 10,
        "warmup_s": 1.0,
        "instructions": ["reach the green sphere", "lift the yellow cube"],
    }
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_tiny_vla_actions_flow_and_the_instruction_arrives(tmp_path, ros_domain_id) -> None:
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from policy_server.background import ServerThread
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer

    policy = RecordingVla()
    server = ServerThread(PolicyServer(policy, ServerConfig(host="127.0.0.1", port=0))).start()
    config = _config(tmp_path, server.port)
    procs = Procs(tmp_path)
    probe = None
    try:
        for kind in ("robot", "camera", "policy_client"):
            procs.start_node(kind, config)
        probe = Probe()
        status = probe.record(String, "policy_client/status", lambda m: json.loads(m.data))
        commands = probe.record(
            JointTrajectory,
            "joint_trajectory_controller/joint_trajectory",
            lambda m: np.array(m.points[-1].positions[:7]),
        )
        pub = probe.node.create_publisher(String, "task/instruction", 1)

        # 1. the configured instruction reaches the model; its actions come back as commands
        # (the probe may discover the command topic after the client's first commands: wait for
        # both)
        probe.wait_for(
            lambda: bool(status) and status[-1][1]["policy_steps"] >= 10 and len(commands) >= 10,
            90,
            "10 policy steps commanded",
            procs,
        )
        with policy.lock:
            assert policy.instructions and set(policy.instructions) == {"lift the red cube"}
        assert status[-1][1]["connected"] and status[-1][1]["refused"] == ""

        # 2. a new instruction on task/instruction replaces it for the following requests
        def switched() -> bool:
            pub.publish(String(data="push the  blue cylinder left"))  # whitespace is normalised
            return "push the blue cylinder left" in policy.instructions

        probe.wait_for(switched, 30, "the published instruction at the server", procs)
        n = len(policy.instructions)
        probe.wait_for(lambda: len(policy.instructions) >= n + 5, 30, "5 more requests", procs)
        with policy.lock:
            assert set(policy.instructions[n:]) == {"push the blue cylinder left"}
        assert status[-1][1]["instruction"] == "push the blue cylinder left"
        # the model's (random but finite) chunks were executed: the arm's commands moved
        qs = np.array([q for _, q in commands])
        assert np.all(np.isfinite(qs)) and float(np.ptp(qs, axis=0).max()) > 1e-3

        # 3. the twin's task node draws one of its instructions per episode and the client sends it
        procs.start_node("task", config)
        wanted = {"reach the green sphere", "lift the yellow cube"}
        probe.wait_for(
            lambda: wanted <= set(policy.instructions[n:]),
            90,
            "both task instructions at the server",
            procs,
        )
    finally:
        if probe is not None:
            probe.close()
        codes = procs.stop_all()
        server.stop()
    assert codes == dict.fromkeys(codes, 0), f"{codes}\n{procs.logs()}"  # each node stopped cleanly
