"""A real PolicyServer (policy_server.server) serving a scripted numpy policy, as a process of its
own.

Used by the end-to-end tests and benchmarks/ros_loop.py: ``python
tests/rlinf_ros/scripted_policy_server.py --port P --camera camera:224x224``. The policy is plain
numpy (the server serves any object with a robot spec and ``infer``), so it also runs in a robot-PC
install without torch. Its action is a smooth joint-space sine wave (phase advancing per request)
with the gripper unchanged, so the arm moves visibly and predictably; its robot spec is the ROS
policy client's joint-delta layout (state 8 = 7 joints + gripper, the given cameras).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import signal
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from policy_server.config import ServerConfig
from policy_server.server import PolicyServer
from rlinf_contracts.spec import ActionSpace, CameraSpec, RobotSpec, StateField


def joint_delta_spec(
    cameras: dict[str, tuple[int, int]], chunk: int = 1, scale: float = 0.05
) -> RobotSpec:
    """The layout of a joint-delta ROS policy client: 7 joints + gripper width, 8-D actions."""
    return RobotSpec(
        state=(StateField("joint_pos", 7), StateField("gripper_width", 1)),
        action=ActionSpace("joint_delta", 8, chunk, joint_scale=scale),
        cameras=tuple(CameraSpec(n, h, w) for n, (h, w) in cameras.items()),
    )


class SineJointPolicy:
    """actions[b, :, j] = amp * sin(2 pi k / period + j) for joints, 0 for the gripper."""

    name = "sine"

    def __init__(self, spec: RobotSpec, amp: float = 0.6, period: int = 40) -> None:
        self.robot_spec = spec
        self.amp, self.period = amp, period
        self.k = 0

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        b = obs["state"].shape[0]
        phase = 2 * math.pi * self.k / self.period
        self.k += 1
        joints = self.amp * np.sin(phase + np.arange(7, dtype=np.float32))
        row = np.concatenate([joints, np.zeros(1, np.float32)]).astype(np.float32)
        return {"actions": np.broadcast_to(row, (b, self.robot_spec.action.chunk, 8)).copy()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--camera", action="append", default=[], help="name:HxW")
    p.add_argument("--chunk", type=int, default=1)
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s server %(levelname)s %(message)s")
    cams = {}
    for c in a.camera:
        name, hw = c.split(":")
        h, w = hw.split("x")
        cams[name] = (int(h), int(w))
    policy = SineJointPolicy(joint_delta_spec(cams, a.chunk))
    server = PolicyServer(policy, ServerConfig(host="127.0.0.1", port=a.port, max_wait_ms=0.0))

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await server.start()
        logging.info("scripted policy server on %s", server.url)
        await stop.wait()
        await server.stop()

    asyncio.run(run())


if __name__ == "__main__":
    main()
