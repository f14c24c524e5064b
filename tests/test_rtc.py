"""Real-time chunking in the policy client loop: early requests, frozen executed steps, blending,
the committed prefix sent for inpainting, and the config that switches it on."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rlinf_contracts.config import ConfigError, from_dict
from rlinf_contracts.features import RobotReading
from rlinf_contracts.spec import ActionSpace, RobotSpec, StateField
from rlinf_ros.config import PolicyClientConfig, RosGraphConfig
from rlinf_ros.policy_loop import PolicyLoop
from rlinf_ros.robot_io import SpecIO
from rlinf_ros.rtc import RtcConfig, blend_weights, max_jump, merge_chunk
from robot_drivers.types import PANDA_HOME
from tests.latency_worker import LatencyWorker

H = 10  # chunk length


def io() -> SpecIO:
    return SpecIO(
        RobotSpec(
            state=(StateField("joint_pos", 7), StateField("gripper_width", 1)),
            action=ActionSpace("joint_delta", 8, joint_scale=0.05),
        )
    )


class IndexPolicy:
    """Row i of every chunk is ``i / 100`` in every dimension: executed rows tell their index."""

    def infer(self, obs: dict) -> dict:
        return {"actions": np.repeat((np.arange(H) / 100.0)[:, None], 8, axis=1)}


class NoisyRamp:
    """A smooth chunk (a slow ramp in time) with a random per-chunk offset, like a sampled
    policy."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def infer(self, obs: dict) -> dict:
        t = obs["tick"] + np.arange(H)
        base = 0.5 * np.sin(0.05 * t)[:, None] + self.rng.normal(0.0, 0.3)
        return {"actions": np.repeat(base, 8, axis=1)}


def drive(loop: PolicyLoop, worker: LatencyWorker, ticks: int) -> list:
    q = np.asarray(PANDA_HOME, dtype=np.float64)
    cmds = []
    for k in range(ticks):
        worker.advance()
        cmd = loop.tick(
            {"state": q, "tick": k}, [RobotReading(q=q.copy(), gripper_width=0.04)], float(k)
        )
        cmds.append(cmd)
        if cmd is not None:
            q = cmd.joints[0].copy()  # a perfect tracker: the arm is where it was commanded
    return cmds


def stalls(cmds: list) -> int:
    first = next(i for i, c in enumerate(cmds) if c is not None and c.kind == "policy")
    return sum(1 for c in cmds[first:] if c is None or c.kind == "hold")


def test_blend_weights_decay_and_exact_values() -> None:
    assert blend_weights(3, "linear").tolist() == pytest.approx([0.75, 0.5, 0.25])
    c = np.array([0.75, 0.5, 0.25])
    assert blend_weights(3, "exp").tolist() == pytest.approx(
        (c * (np.exp(c) - 1) / (np.e - 1)).tolist()
    )
    assert blend_weights(4, "none").tolist() == [0.0] * 4 and blend_weights(0, "exp").shape == (0,)
    with pytest.raises(ValueError, match="blend must be one of"):
        blend_weights(2, "cubic")


def test_merge_drops_the_rows_in_the_past_and_blends_the_overlap() -> None:
    new = np.arange(6, dtype=float)[:, None]  # rows 0..5
    old = np.full((2, 1), 10.0)
    out = merge_chunk(new, old, delay=3, blend="linear")
    # rows 3, 4, 5 remain; the first two are blended with the old rows (weights 2/3, 1/3)
    assert out[:, 0].tolist() == pytest.approx(
        [2 / 3 * 10 + 1 / 3 * 3, 1 / 3 * 10 + 2 / 3 * 4, 5.0]
    )
    assert merge_chunk(new, old, delay=99, blend="none").shape == (1, 1)  # never empty


def test_rtc_config_is_validated_with_the_key_named() -> None:
    cfg = from_dict(
        RosGraphConfig, {"policy_client": {"rtc": {"enabled": True, "execute_horizon": 4}}}
    )
    assert cfg.policy_client.rtc == RtcConfig(enabled=True, execute_horizon=4)
    with pytest.raises(ConfigError, match="rtc.execute_horizon"):
        from_dict(PolicyClientConfig, {"rtc": {"execute_horizon": 0}})
    with pytest.raises(ConfigError, match="rtc.blend"):
        from_dict(PolicyClientConfig, {"rtc": {"blend": "cubic"}})
    with pytest.raises(ConfigError, match="Did you mean 'rtc.execute_horizon'"):
        from_dict(PolicyClientConfig, {"rtc": {"execute_horizont": 3}})


@pytest.mark.parametrize("latency", [1, 3])
def test_rtc_removes_stalls_that_naive_chunking_has(latency: int) -> None:
    naive_w, rtc_w = LatencyWorker(IndexPolicy(), latency), LatencyWorker(IndexPolicy(), latency)
    naive = drive(PolicyLoop(naive_w, io(), prefetch=0), naive_w, 60)
    rtc = drive(PolicyLoop(rtc_w, io(), rtc=RtcConfig(enabled=True, execute_horizon=5)), rtc_w, 60)
    assert stalls(naive) >= (latency - 1) * 4 + 4  # it waits `latency` ticks per chunk of 10
    assert stalls(rtc) == 0


def test_rtc_executes_the_row_planned_for_now() -> None:
    worker = LatencyWorker(IndexPolicy(), 3)
    loop = PolicyLoop(worker, io(), rtc=RtcConfig(enabled=True, execute_horizon=4, blend="none"))
    cmds = drive(loop, worker, 30)
    firsts = [c for c in cmds if c is not None and c.first]
    # the first chunk waited (nothing to execute); later ones arrive 3 ticks after the request
    assert firsts[1].action[0] == pytest.approx(0.03)
    assert list(loop.stats.delay_ticks)[1:] == [3] * (len(loop.stats.delay_ticks) - 1)


def test_request_carries_the_committed_prefix_and_the_expected_delay() -> None:
    worker = LatencyWorker(IndexPolicy(), 2)
    loop = PolicyLoop(worker, io(), rtc=RtcConfig(enabled=True, execute_horizon=4))
    drive(loop, worker, 40)
    early = [r for r in worker.requests if "rtc_prefix" in r]
    assert early, "no request went out while a chunk was still executing"
    last = early[-1]
    assert last["rtc_inference_delay"] == 2
    assert last["rtc_prefix"].shape[1] == 8 and len(last["rtc_prefix"]) >= 2
    # the prefix is what is still planned: its rows continue each other smoothly, no reset to row 0
    assert np.all(np.diff(last["rtc_prefix"][:, 0]) > -1e-6)
    off = LatencyWorker(IndexPolicy(), 2)
    drive(
        PolicyLoop(off, io(), rtc=RtcConfig(enabled=True, execute_horizon=4, send_prefix=False)),
        off,
        20,
    )
    assert not any("rtc_prefix" in r for r in off.requests)


def test_blending_shrinks_boundary_jumps_of_a_noisy_chunked_policy() -> None:
    jumps = {}
    for name, rtc in [
        ("naive", None),
        ("none", RtcConfig(True, 3, "none")),
        ("exp", RtcConfig(True, 3, "exp")),
        ("linear", RtcConfig(True, 3, "linear")),
    ]:
        worker = LatencyWorker(NoisyRamp(seed=1), 3)
        cmds = drive(PolicyLoop(worker, io(), prefetch=0, rtc=rtc), worker, 300)
        rows = [c.action if c.kind == "policy" else np.zeros(8) for c in cmds]
        jumps[name] = max_jump(
            rows[20:]
        )  # every tick after start-up: a blend must not just move the jump
    assert jumps["linear"] < 0.5 * jumps["none"], jumps
    assert jumps["exp"] < 0.8 * jumps["none"], jumps
    assert jumps["linear"] < 0.5 * jumps["naive"], jumps


class _GatedConn:
    """A connection whose answer waits until the test opens the gate: the real InferenceWorker
    thread delivers it, and the test decides how many ticks after its request that is."""

    def __init__(self) -> None:
        import threading

        self.gate = threading.Semaphore(0)

    def infer(self, obs: dict) -> dict:
        assert self.gate.acquire(timeout=60), "the test never released this request"
        return {"actions": np.repeat((np.arange(20) / 100.0)[:, None], 8, axis=1)}

    def close(self) -> None:
        pass


def _poll(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.002)


def test_rtc_with_the_real_inference_thread_keeps_rows_aligned_with_ticks() -> None:
    """Answers delivered by the real inference thread 1-3 ticks after their request: every loaded
    chunk starts at the row planned for the tick it is loaded in, and the arm never waits after
    the first chunk (each answer comes before the chunk executing runs out)."""
    from rlinf_ros.policy_loop import InferenceWorker

    conn = _GatedConn()
    worker = InferenceWorker(lambda: conn, reconnect_s=0.05)
    loop = PolicyLoop(worker, io(), rtc=RtcConfig(enabled=True, execute_horizon=5, blend="none"))
    latencies = [
        2,
        3,
        1,
        2,
        3,
        3,
        1,
        2,
    ]  # ticks from a request to its answer, one per request in turn
    answered: list[int] = []
    try:
        _poll(lambda: worker.connected, "the inference thread to connect")
        q = np.asarray(PANDA_HOME, dtype=np.float64)
        cmds, asked_at = [], None
        for k in range(80):
            cmds.append(
                loop.tick({"state": q}, [RobotReading(q=q.copy(), gripper_width=0.04)], float(k))
            )
            if asked_at is None and worker.busy:
                asked_at = k  # a request went out in this tick
            if (
                asked_at is not None
                and k + 1 - asked_at >= latencies[len(answered) % len(latencies)]
            ):
                answered.append(k + 1 - asked_at)
                conn.gate.release()  # the answer is in before the next tick
                _poll(lambda: not worker.busy, "the inference thread to deliver the answer")
                asked_at = None
    finally:
        conn.gate.release()
        worker.stop()
    firsts = [c for c in cmds if c is not None and c.first]
    delays = list(loop.stats.delay_ticks)
    assert len(firsts) >= 5 and len(delays) == len(firsts)
    assert delays == answered[: len(delays)]  # each chunk loaded in the tick after its answer
    assert all(
        c.action[0] == pytest.approx(d / 100.0) for c, d in zip(firsts, delays)
    )  # row d at tick d
    start = next(i for i, c in enumerate(cmds) if c is not None and c.kind == "policy")
    assert all(c.kind == "policy" for c in cmds[start:]), (
        "the arm waited although the chunk had steps left"
    )


def test_an_execute_horizon_beyond_the_chunk_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    worker = LatencyWorker(IndexPolicy(), 1)
    with caplog.at_level("WARNING", logger="rlinf_ros.policy_loop"):
        drive(PolicyLoop(worker, io(), rtc=RtcConfig(enabled=True, execute_horizon=H)), worker, 30)
    assert (
        sum(
            "rtc.execute_horizon 10 >= the policy's chunk of 10" in r.message
            for r in caplog.records
        )
        == 1
    )
