"""A real PolicyServer (policy_server.server) serving a scripted policy, as a process of its own.

Used by the end-to-end test and benchmarks/ros_loop.py: ``python tests/rlinf_ros/scripted_policy_server.py
--port P --camera camera:224x224``. The policy is a tiny torch module whose action is a smooth
joint-space sine wave (phase advancing per request) with the gripper half open, so the arm
moves visibly and predictably; its observation spec matches the ROS policy client's
(state 8 = 7 joints + gripper, one camera).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import signal
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from learner.models.distributions import ChunkGaussian  # noqa: E402
from learner.models.policy import Policy, PolicyOutput, PolicySpec  # noqa: E402
from policy_server.config import ServerConfig  # noqa: E402
from policy_server.server import PolicyServer  # noqa: E402


class SineJointPolicy(Policy):
    """actions[b, 0, j] = amp * sin(2 pi k / period + j) for joints, 0 for the gripper."""

    def __init__(self, spec: PolicySpec, amp: float = 0.6, period: int = 40) -> None:
        super().__init__()
        self.spec = spec
        self.amp, self.period = amp, period
        self.k = 0
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, obs: dict) -> PolicyOutput:
        b = obs["state"].shape[0]
        phase = 2 * math.pi * self.k / self.period
        self.k += 1
        joints = self.amp * torch.sin(phase + torch.arange(7, dtype=torch.float32))
        mean = torch.cat([joints, torch.zeros(1)]).expand(b, self.spec.chunk, 8).clone()
        return PolicyOutput(ChunkGaussian(mean, torch.full_like(mean, -5.0)), None)


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
    torch.set_num_threads(1)
    policy = SineJointPolicy(PolicySpec(state_dim=8, action_dim=8, chunk=a.chunk, cameras=cams))
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
