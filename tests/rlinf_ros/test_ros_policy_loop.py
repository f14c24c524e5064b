"""Policy client control logic: chunks become joint targets; a lost server means hold; resume.

The real inference thread answers an in-process server; between two ticks the driver waits until
the request in flight has been answered (a server faster than the control period), so what each
tick commands does not depend on how the machine schedules the thread."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from rlinf_contracts.control import gripper_width
from rlinf_contracts.features import RobotReading
from rlinf_contracts.spec import ActionSpace, RobotSpec, StateField
from rlinf_ros.policy_loop import InferenceWorker, PolicyLoop
from rlinf_ros.robot_io import SpecIO
from robot_drivers.types import PANDA_HOME


def joint_io(scale: float = 0.05, mode: str = "joint_delta", arms: int = 1) -> SpecIO:
    """The robot side of a joint-space spec: 7 joints + gripper per arm."""
    return SpecIO(
        RobotSpec(
            state=(StateField("joint_pos", 7), StateField("gripper_width", 1)),
            action=ActionSpace(mode, 8 * arms, joint_scale=scale),
            arms=arms,
        )
    )


def chunk_to_targets(chunk: np.ndarray, base: list[np.ndarray], mode: str, scale: float) -> list:
    return joint_io(scale, mode, len(base)).decode(chunk, [RobotReading(q=b) for b in base])


class Server:
    """An in-process stand-in for the policy server: can go down and come back."""

    def __init__(self, chunk: int = 1) -> None:
        self.alive = True
        self.generation = 0
        self.calls = 0
        self.chunk = chunk

    def connect(self) -> Conn:
        if not self.alive:
            raise ConnectionRefusedError("server down")
        return Conn(self, self.generation)

    def kill(self) -> None:
        self.alive = False
        self.generation += 1

    def restart(self) -> None:
        self.alive = True


class Conn:
    def __init__(self, server: Server, gen: int) -> None:
        self.server, self.gen = server, gen

    def infer(self, obs: dict) -> dict:
        if not self.server.alive or self.server.generation != self.gen:
            raise ConnectionResetError("connection closed")
        self.server.calls += 1
        return {
            "actions": np.tile(np.array([1.0, -1.0, 0, 0, 0, 0, 0.5, 1.0]), (self.server.chunk, 1))
        }

    def close(self) -> None:
        pass


def measured(q: np.ndarray) -> list[RobotReading]:
    return [RobotReading(q=q.copy(), gripper_width=0.08)]


def poll(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.002)


def connected(worker: InferenceWorker) -> InferenceWorker:
    poll(lambda: worker.connected, "the inference thread to connect")
    return worker


def run_ticks(loop: PolicyLoop, q: np.ndarray, n: int, obs: bool = True) -> list:
    out = []
    for _ in range(n):
        cmd = loop.tick({"state": q} if obs else None, measured(q) if obs else None, time.time())
        out.append(cmd)
        poll(
            lambda: not loop.worker.busy, "the request in flight to be answered"
        )  # as between 10 Hz ticks
    return out


def test_chunk_to_targets_integrates_deltas_and_maps_gripper() -> None:
    q = np.array(PANDA_HOME)
    chunk = np.array(
        [[1, 0, 0, 0, 0, 0, 0, -1], [1, 0, 0, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 0, 0, 0]]
    )
    cmds = chunk_to_targets(chunk, [q], "joint_delta", 0.1)
    assert [c.joints[0][0] - q[0] for c in cmds] == pytest.approx([0.1, 0.2, 0.3])  # 2 clipped to 1
    assert [c.grippers[0] for c in cmds] == pytest.approx([0.0, 0.08, 0.04])
    assert gripper_width(0.0) == pytest.approx(0.04)
    absolute = chunk_to_targets(np.zeros((1, 8)), [q], "joint_position", 0.1)[0].joints[0]
    assert absolute[0] == pytest.approx(0.0) and absolute[3] == pytest.approx(
        (-3.0718 - 0.0698) / 2
    )
    with pytest.raises(ValueError, match=r"\[chunk, 16\] for 2 arm"):
        chunk_to_targets(np.zeros((1, 8)), [q, q], "joint_delta", 0.1)
    with pytest.raises(ValueError, match="NaN"):
        chunk_to_targets(np.full((1, 8), np.nan), [q], "joint_delta", 0.1)


def test_loop_runs_the_policy_then_holds_on_loss_and_resumes() -> None:
    server = Server()
    worker = InferenceWorker(server.connect, reconnect_s=0.05)
    loop = PolicyLoop(worker, joint_io(0.01))
    q = np.array(PANDA_HOME)
    try:
        connected(worker)
        cmds = run_ticks(loop, q, 10)
        policy = [c for c in cmds if c.kind == "policy"]
        assert [c.kind for c in cmds] == ["hold"] + [
            "policy"
        ] * 9  # only the first tick waits for a chunk
        assert all(
            c.joints[0][0] == pytest.approx(q[0] + 0.01) for c in policy
        )  # base = measured q
        assert all(c.grippers[0] == pytest.approx(0.08) for c in policy)
        assert loop.last is not None
        last_target = loop.last.joints[0].copy()

        server.kill()
        cmds = run_ticks(loop, q + 0.3, 10)  # the arm drifted? never mind: hold the last target
        holds = [c for c in cmds if c.kind == "hold"]
        assert (
            len(holds) == 9 and holds[-1].reason == "server_lost"
        )  # the chunk answered before the loss ran
        assert all(np.allclose(c.joints[0], last_target) for c in holds)
        assert not worker.connected and worker.failures >= 1

        server.restart()
        connected(worker)  # it reconnects by itself
        cmds = run_ticks(loop, q, 3)
        assert cmds[-1].kind == "policy" and worker.connects == 2
        assert loop.stats.summary()["latency_ms_p50"] is not None
    finally:
        worker.stop()


def test_loop_holds_measured_joints_until_the_first_chunk() -> None:
    server = Server()
    server.kill()
    worker = InferenceWorker(server.connect, reconnect_s=0.05)
    loop = PolicyLoop(worker, joint_io())
    q = np.array(PANDA_HOME)
    try:
        assert loop.tick(None, None, None) is None  # nothing known yet: publish nothing
        cmd = loop.tick({"state": q}, measured(q), time.time())
        assert cmd is not None
        assert cmd.kind == "hold" and np.allclose(cmd.joints[0], q) and cmd.reason == "server_lost"
    finally:
        worker.stop()


def test_chunks_are_executed_one_step_per_tick() -> None:
    server = Server(chunk=4)
    worker = InferenceWorker(server.connect, reconnect_s=0.05)
    loop = PolicyLoop(worker, joint_io(0.01), prefetch=1)
    q = np.array(PANDA_HOME)
    try:
        connected(worker)
        cmds = [c for c in run_ticks(loop, q, 12) if c.kind == "policy"]
        steps = [round((c.joints[0][0] - q[0]) / 0.01) for c in cmds]
        assert steps[:4] == [1, 2, 3, 4]  # the chunk is integrated step by step from its base
        # the next chunk, requested with one step left (prefetch 1), takes over right after it and
        # starts again from the measured joints
        assert steps == [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3], steps
        assert server.calls == 3  # a request every few ticks, not every tick
    finally:
        worker.stop()


def test_a_tick_with_nothing_to_execute_acts_on_its_own_observation() -> None:
    server = Server()
    worker = InferenceWorker(server.connect, reconnect_s=0.05)
    t_obs = 1000.0
    # a wait long enough for any machine (it ends when the answer is in); the loop's clock reads
    # 0.25 s after the observation when the command goes out
    loop = PolicyLoop(
        connected(worker), joint_io(0.01), max_wait_s=60.0, clock=lambda: t_obs + 0.25
    )
    q = np.array(PANDA_HOME)
    try:
        cmd = loop.tick({"state": q}, measured(q), t_obs)
        assert cmd is not None
        assert cmd.kind == "policy" and cmd.t_obs == t_obs and cmd.first
        assert loop.stats.summary()["command_ms_p50"] == pytest.approx(250.0)
    finally:
        worker.stop()


def test_ee_chunk_before_any_pose_report_is_discarded_not_a_crash() -> None:
    """An ee-space spec whose state needs no pose can get a chunk before the robot's first
    current_pose: there is nothing to integrate it from, so it is dropped (and counted)."""

    class EeConn(Conn):
        def infer(self, obs: dict) -> dict:
            return {"actions": np.zeros((2, 7))}

    server = Server()
    worker = InferenceWorker(lambda: EeConn(server, 0), reconnect_s=0.05)
    io = SpecIO(RobotSpec(state=(StateField("joint_pos", 7),), action=ActionSpace("ee_delta", 7)))
    loop = PolicyLoop(connected(worker), io)
    q = np.array(PANDA_HOME)
    try:
        cmds = run_ticks(loop, q, 10)  # measured readings carry joints only, no ee pose
        assert not [c for c in cmds if c is not None and c.kind == "policy"]
        assert loop.stats.bad_chunks >= 1
    finally:
        worker.stop()


class EchoServer:
    """Answers one row whose first value is the observation's counter / 100 (``state[0]``), so a
    command names the observation it was computed from; ``gate`` cleared holds the answers back
    (a server that misses the tick's wait) until the test sets it."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()

    def connect(self) -> EchoServer:
        return self

    def infer(self, obs: dict) -> dict:
        assert self.gate.wait(60.0), "the test never released the answer"
        row = np.zeros(8)
        row[0] = float(obs["state"][0]) / 100.0
        return {"actions": row[None]}

    def close(self) -> None:
        pass


def test_a_one_step_policy_acts_on_the_observation_of_its_tick_after_a_missed_wait() -> None:
    """Chunk 1 at the node's settings (prefetch 1, a bounded wait): tick 0's answer misses the
    wait (hold), tick 1's too (tick 0's row goes out one tick late, counted); from then on the
    answers come in time and every tick executes the row computed from its own observation --
    a late row never leaves the client acting on the previous tick's observation."""
    server = EchoServer()
    worker = InferenceWorker(server.connect, reconnect_s=0.05)
    loop = PolicyLoop(connected(worker), joint_io(0.01), prefetch=1)
    q = np.array(PANDA_HOME)

    def tick(k: int, wait_s: float) -> Any:
        loop.max_wait_s = wait_s  # the server is held back (gate) or answers at once
        return loop.tick({"state": np.array([float(k)])}, measured(q), 1000.0 + k)

    def answered() -> None:
        server.gate.set()
        poll(lambda: not worker.busy, "the held-back answer")

    try:
        server.gate.clear()
        first = tick(0, 0.01)
        assert first.kind == "hold" and first.reason == "waiting"
        answered()
        server.gate.clear()
        late = tick(1, 0.01)  # tick 1's own answer is held back too: tick 0's row, counted
        assert late.kind == "policy" and late.t_obs == 1000.0
        assert late.action[0] == pytest.approx(0.0)
        assert loop.stats.late_steps == 1
        answered()  # tick 1's answer arrives between ticks: it is late for tick 2
        cmds = []
        for k in range(2, 8):  # a wait long enough for any machine (it ends when the answer is in)
            cmds.append(tick(k, 60.0))
            poll(
                lambda: not worker.busy, "the request in flight to be answered"
            )  # as between ticks
        assert [c.kind for c in cmds] == ["policy"] * 6
        assert [round(float(c.action[0]) * 100) for c in cmds] == list(range(2, 8))
        assert [c.t_obs for c in cmds] == [1000.0 + k for k in range(2, 8)]
        summary = loop.stats.summary()
        assert (summary["late_steps"], summary["missed_waits"]) == (1, 2)  # ticks 0 and 1 missed
    finally:
        server.gate.set()
        worker.stop()


def test_chunked_policies_keep_requesting_ahead() -> None:
    """Longer chunks are unaffected: the next chunk is requested with one step left (prefetch)
    and that step goes out without waiting for it."""
    chunk = 3

    class Chunked(EchoServer):
        def infer(self, obs: dict) -> dict:
            return {"actions": np.repeat(super().infer(obs)["actions"], chunk, axis=0)}

    chunked = Chunked()
    worker = InferenceWorker(chunked.connect, reconnect_s=0.05)
    loop = PolicyLoop(connected(worker), joint_io(0.01), prefetch=1, max_wait_s=60.0)
    q = np.array(PANDA_HOME)
    try:
        cmds = []
        for k in range(6):
            cmds.append(loop.tick({"state": np.array([float(k)])}, measured(q), 1000.0 + k))
            poll(lambda: not worker.busy, "the request in flight to be answered")
        # rows of tick 0's chunk at ticks 0-2 (tick 2 requests the next), then tick 2's chunk
        assert [round(float(c.action[0]) * 100) for c in cmds] == [0, 0, 0, 2, 2, 2]
        assert loop.stats.late_steps == 0
    finally:
        worker.stop()
