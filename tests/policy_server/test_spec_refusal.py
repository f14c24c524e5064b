"""A client built for another robot spec is refused once, with both layouts named, and stops."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from ps_helpers import local_config

from policy_server.background import ServerThread
from policy_server.client import PolicyClient, SpecRefused
from policy_server.server import PolicyServer
from rlinf_contracts.spec import ActionSpace, CameraSpec, RobotSpec, StateField

REACH = RobotSpec(
    state=(
        StateField("ee_pos", 3),
        StateField("ee_rot6d", 6),
        StateField("joint_pos", 7),
        StateField("joint_vel", 7),
        StateField("gripper_width", 1),
        StateField("goal_pos", 3),
        StateField("goal_minus_ee", 3),
    ),
    action=ActionSpace("ee_delta", 7),
    control_hz=20,
    base_position=(-0.56, 0.0, 0.0),
)
JOINTS = RobotSpec(
    state=(StateField("joint_pos", 7), StateField("gripper_width", 1)),
    action=ActionSpace("joint_delta", 8, joint_scale=0.05),
    cameras=(CameraSpec("camera", 224, 224),),
)


class ZeroPolicy:
    """A numpy policy: the server serves any object with a robot spec and infer()."""

    name = "zero"

    def __init__(self, spec: RobotSpec) -> None:
        self.robot_spec = spec

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {"actions": np.zeros((len(obs["state"]), 1, self.robot_spec.action_dim), np.float32)}


def test_mismatched_client_is_refused_once_naming_both_layouts(monkeypatch) -> None:
    connects: list[str] = []
    real = PolicyClient._connect

    def counted(self: PolicyClient) -> Any:
        connects.append(self.url)
        return real(self)

    monkeypatch.setattr(PolicyClient, "_connect", counted)
    with ServerThread(PolicyServer(ZeroPolicy(REACH), local_config())) as srv:
        with pytest.raises(SpecRefused) as err:
            PolicyClient(srv.url, robot_spec=JOINTS, retries=5, backoff_s=0.5)
        assert len(connects) == 1  # final at once: no back-off retries
        msg = str(err.value)
        assert (
            "state layout differs: ee_pos(3) ee_rot6d(6) joint_pos(7) joint_vel(7) "
            "gripper_width(1) goal_pos(3) goal_minus_ee(3) vs joint_pos(7) gripper_width(1)" in msg
        )
        assert (
            "Policy: state[30]" in msg and "Robot: state[8] = joint_pos(7) gripper_width(1)" in msg
        )
        assert "cameras differ: none vs camera(224x224)" in msg
        assert srv.server.metrics.errors.get("spec_mismatch") == 1
        # the same spec is admitted, its metadata announces the policy's spec, and inference works
        with PolicyClient(srv.url, robot_spec=REACH) as ok:
            assert RobotSpec.from_dict(ok.metadata.robot_spec) == REACH
            assert ok.infer({"state": np.zeros(30, np.float32)})["actions"].shape == (1, 7)
        # a client without a spec (openpi's) is admitted and checked per request, as before
        with PolicyClient(srv.url) as plain:
            assert plain.infer({"state": np.zeros(30, np.float32)})["actions"].shape == (1, 7)


def test_policy_loop_reports_refused_and_does_not_reconnect() -> None:
    from policy_server.client import SpecRefused as Refused
    from rlinf_contracts.features import RobotReading
    from rlinf_ros.policy_loop import InferenceWorker, PolicyLoop
    from rlinf_ros.robot_io import SpecIO

    with ServerThread(PolicyServer(ZeroPolicy(REACH), local_config())) as srv:
        attempts = []

        def connect() -> PolicyClient:
            attempts.append(time.monotonic())
            return PolicyClient(srv.url, robot_spec=JOINTS, retries=0)

        worker = InferenceWorker(connect, reconnect_s=0.05, final_errors=(Refused,))
        loop = PolicyLoop(worker, SpecIO(JOINTS))
        q = np.zeros(7)
        try:
            for _ in range(30):  # 1.5 s of ticks: a retry loop would connect ~30 times
                cmd = loop.tick(
                    {"state": np.zeros(8, np.float32)}, [RobotReading(q=q)], time.time()
                )
                time.sleep(0.05)
            assert len(attempts) == 1
            assert cmd.kind == "hold" and cmd.reason == "refused"
            assert "Robot: state[8]" in worker.refused
            assert srv.server.metrics.errors.get("spec_mismatch") == 1
        finally:
            worker.stop()
