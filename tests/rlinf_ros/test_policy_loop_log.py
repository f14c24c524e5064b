"""The policy loop's log in a nominal run: hold <-> policy flips summarised, not one line each.

A one-step-chunk server and ``prefetch=0`` make the loop hold (``waiting``) on every other tick,
the nominal flip of a robot whose chunk runs out before the next answer arrives. The summary's
clock is a fake one advancing 0.5 s per tick, so the line count is exact."""

from __future__ import annotations

import time

import numpy as np

from rlinf_contracts.features import RobotReading
from rlinf_contracts.spec import ActionSpace, RobotSpec, StateField
from rlinf_ros.policy_loop import STATE_LOG_INTERVAL_S, InferenceWorker, PolicyLoop
from rlinf_ros.robot_io import SpecIO
from robot_drivers.types import PANDA_HOME


class Conn:
    def infer(self, obs: dict) -> dict:
        return {"actions": np.zeros((1, 8))}

    def close(self) -> None:
        pass


def wait_for(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.002)


def test_nominal_flips_are_logged_once_then_summarised_per_interval() -> None:
    io = SpecIO(
        RobotSpec(
            state=(StateField("joint_pos", 7), StateField("gripper_width", 1)),
            action=ActionSpace("joint_delta", 8, joint_scale=0.01),
        )
    )
    worker = InferenceWorker(Conn, reconnect_s=0.05)
    loop = PolicyLoop(worker, io, prefetch=0)
    now, lines = [0.0], []
    loop.states.clock, loop.states.emit = (lambda: now[0]), lines.append
    q = np.array(PANDA_HOME)
    kinds = []
    try:
        wait_for(lambda: worker.connected, "the inference thread to connect")
        assert STATE_LOG_INTERVAL_S == 60.0
        for k in range(240):  # 2 minutes at 2 Hz
            now[0] = k * 0.5
            cmd = loop.tick({"state": q}, [RobotReading(q=q.copy(), gripper_width=0.08)], 0.0)
            kinds.append(cmd.kind if cmd is not None else None)
            wait_for(lambda: not worker.busy, "the request in flight to be answered")
    finally:
        worker.stop()
    flips = sum(a != b for a, b in zip(kinds, kinds[1:])) + 1
    assert flips >= 200  # the nominal pattern: before, one log line per flip
    assert lines[:2] == ["policy loop: hold (waiting)", "policy loop: policy"]
    summaries = lines[2:]
    assert len(summaries) == 1  # the window opened at t=1 s closed at t=61 s; the next is open
    assert all(s.startswith("policy loop: hold (waiting) ") for s in summaries)
    assert summaries[0].endswith(" in the last 60 s")
    counted = sum(loop.states.pending.values()) + sum(
        int(p.split(" time")[0].rsplit(" ", 1)[1]) for s in summaries for p in s.split(", ")
    )
    assert counted + 2 == flips == sum(loop.states.total.values())
