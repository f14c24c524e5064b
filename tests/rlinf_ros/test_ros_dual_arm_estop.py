"""Dual-arm robot node over real DDS: one ``estop`` call stops both arms mid-motion, every command
(trajectories, gripper services) is refused with the reason while latched, ``reset_estop``
re-enables both. Conditions are polled (no wall-clock rates); the node must exit 0 on SIGTERM."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import Probe, Procs, kinematic_dual_arm

pytestmark = [pytest.mark.ros]

SIDES = ("left", "right")


def _poll(
    cond: Callable[[], bool], timeout: float, what: str, procs: Procs, tick: Callable[[], None]
) -> None:
    """Run ``tick`` (re-send the commands) until ``cond`` holds; fail with the node's log."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        tick()
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{procs.logs()}")


def test_estop_service_stops_both_arms_and_reset_reenables_them(
    tmp_path: Path, ros_domain_id: int
) -> None:
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from rlinf_ros.conversions import trajectory_msg

    procs = Procs(tmp_path)
    probe = None
    try:
        procs.start_node("robot", kinematic_dual_arm(tmp_path))
        probe = Probe()
        joints = probe.record(
            JointState, "joint_states", lambda m: (list(m.name), np.array(m.position))
        )
        state = probe.record(
            String, "franka_robot_state_broadcaster/robot_state", lambda m: json.loads(m.data)
        )
        pub = probe.node.create_publisher(
            JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10
        )
        probe.wait_for(
            lambda: joints and state and pub.get_subscription_count() > 0,
            60,
            "dual robot up",
            procs,
        )

        def q() -> np.ndarray:
            with probe.lock:
                return joints[-1][1][1].copy()

        def arms() -> dict:
            with probe.lock:
                return state[-1][1]["arms"]

        names, q0 = joints[-1][1]
        goal = q0 + np.tile(
            [0.4, 0.0, 0.3, 0.0, 0.4, 0.0, 0.8], 2
        )  # a 4 s move of both arms, inside the box
        start = time.time()
        duration = [4.0]

        # the sender stays alive (re-sends), so the watchdog never stops the move
        def send() -> None:
            pub.publish(trajectory_msg(names, goal[None], np.array(duration), stamp=start))

        def moved(side: str) -> bool:
            return np.abs(q()[:7] - q0[:7] if side == "left" else q()[7:] - q0[7:]).max() > 0.05

        _poll(lambda: moved("left") and moved("right"), 30, "both arms moving", procs, send)
        assert not np.allclose(q(), goal, atol=0.05)  # still on the way

        ok, msg = probe.call_trigger("estop")
        assert ok and "reset_estop" in msg
        _poll(
            lambda: all(arms()[s]["estop"] for s in SIDES), 10, "both arms e-stopped", procs, send
        )

        # stopped: two readings a while apart agree (polled, on a loaded machine the node may lag)
        def still() -> bool:
            a = q()
            time.sleep(0.3)
            return bool(np.allclose(q(), a, atol=1e-9))

        _poll(still, 10, "both arms standing still", procs, send)
        stopped = q()
        assert not np.allclose(stopped, goal, atol=0.05)

        # refused while latched: trajectories (counted per arm), the grippers say why
        _poll(
            lambda: all(arms()[s]["safety"].get("estop_refused", 0) > 0 for s in SIDES),
            10,
            "trajectories refused on both arms",
            procs,
            send,
        )
        for side in SIDES:
            ok, msg = probe.call_trigger(f"{side}/franka_gripper/open")
            assert not ok and "e-stop is active" in msg and "reset_estop" in msg, msg
        assert np.allclose(q(), stopped, atol=1e-9)

        ok, msg = probe.call_trigger("reset_estop")
        assert ok
        _poll(
            lambda: not any(arms()[s]["estop"] for s in SIDES), 10, "e-stop released", procs, send
        )
        start, duration = 0.0, [0.2]  # from where each arm stopped, at the speed limit
        _poll(
            lambda: np.allclose(q(), goal, atol=1e-3),
            60,
            "both arms reach the goal after reset",
            procs,
            send,
        )
        for side in SIDES:
            ok, msg = probe.call_trigger(f"{side}/franka_gripper/open")
            assert ok, msg
    finally:
        if probe is not None:
            probe.close()
        codes = procs.stop_all()
    assert codes["robot"] == 0
