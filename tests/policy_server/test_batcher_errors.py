"""A policy that breaks its contract, and a batcher that closes: every waiting client gets a
clear answer, nobody hangs, and the server keeps serving."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest
import websockets
from ps_helpers import LinearPolicy, expected_actions, local_config

from learner.serving import TorchPolicy
from policy_server.background import ServerThread
from policy_server.batching import BatcherClosed, DynamicBatcher
from policy_server.client import PolicyClient, open_sync
from policy_server.hotswap import ModelSlot
from policy_server.metrics import ServerMetrics
from policy_server.server import MAX_ERROR_CHARS, PolicyServer
from rlinf_contracts import wire

GOOD = {"state": np.array([0.1, 0.2, 0.3, 0.4], np.float32)}
CLIENTS = 3


class Misbehaving:
    """A served policy whose ``infer`` output is broken in the way ``mode`` says (``ok``:
    correct)."""

    def __init__(self) -> None:
        self.inner = TorchPolicy(LinearPolicy())
        self.robot_spec = self.inner.robot_spec
        self.mode = "ok"
        self.release, self.entered = threading.Event(), threading.Event()

    def infer(self, obs: dict[str, Any]) -> Any:
        out = self.inner.infer(obs)
        actions = np.asarray(out["actions"])
        if self.mode == "wrong_batch":
            return {"actions": np.concatenate([actions, actions[:1]])}
        if self.mode == "missing_key":
            return {"action": actions}
        if self.mode == "not_a_map":
            return actions
        if self.mode == "huge_error":
            raise RuntimeError("x" * 20_000 + " the end")
        if self.mode == "block":
            self.entered.set()
            self.release.wait(60)
        return out


def _raw(url: str):
    ws = open_sync(url, max_size=None, compression=None, open_timeout=30)
    wire.unpackb(ws.recv(timeout=30))  # metadata
    return ws


@pytest.mark.parametrize(
    "mode, says",
    [
        ("wrong_batch", "expected [B=1, chunk, A]"),
        ("missing_key", "no 'actions'"),
        ("not_a_map", "returned ndarray"),
    ],
)
def test_a_policy_output_of_the_wrong_form_is_a_clear_error_for_every_waiting_client(mode, says):
    policy = Misbehaving()
    with ServerThread(
        PolicyServer(policy, local_config(max_wait_ms=200), policy_name="bad")
    ) as srv:
        policy.mode = mode
        clients = [_raw(srv.url) for _ in range(CLIENTS)]
        for ws in clients:  # all waiting at once: they may share one batch
            ws.send(wire.packb(GOOD))
        for ws in clients:
            reply = ws.recv(timeout=60)
            assert isinstance(reply, str) and reply.startswith("inference error:"), reply
            assert says in reply and "Traceback" not in reply and len(reply) <= MAX_ERROR_CHARS, (
                reply
            )
            with pytest.raises(websockets.ConnectionClosed) as info:
                ws.recv(timeout=60)
            assert info.value.rcvd is not None and info.value.rcvd.code == 1011
        policy.mode = "ok"
        with PolicyClient(srv.url) as good:  # the server keeps serving
            np.testing.assert_allclose(
                good.infer(GOOD)["actions"], expected_actions(GOOD["state"], 0), rtol=1e-6
            )
        assert srv.server.metrics.errors["inference"] == CLIENTS


def test_a_long_policy_traceback_is_cut_keeping_the_exception_line():
    policy = Misbehaving()
    with ServerThread(PolicyServer(policy, local_config(), policy_name="bad")) as srv:
        policy.mode = "huge_error"
        ws = _raw(srv.url)
        ws.send(wire.packb(GOOD))
        reply = ws.recv(timeout=60)
        assert isinstance(reply, str) and len(reply) <= MAX_ERROR_CHARS, len(reply)
        assert reply.startswith("inference error:") and reply.rstrip().endswith("the end"), reply[
            -200:
        ]
        ws.close()


def test_requests_in_flight_or_queued_when_the_batcher_closes_fail_clearly():
    policy = Misbehaving()
    policy.mode = "block"

    async def scenario() -> tuple[list[Any], BaseException | None]:
        batcher = DynamicBatcher(
            ModelSlot(policy), ServerMetrics(), max_batch=1, max_wait_ms=0, open_clients=lambda: 2
        )
        batcher.start()
        sample = {"state": GOOD["state"], "images": {}, "instruction": ""}
        running = asyncio.ensure_future(batcher.submit(sample, 0.0))  # blocks inside the forward
        queued = asyncio.ensure_future(batcher.submit(sample, 0.0))  # waits behind it
        while not policy.entered.is_set():  # the first request's forward is running
            await asyncio.sleep(0.01)
        await batcher.stop()
        outcomes = await asyncio.wait_for(
            asyncio.gather(running, queued, return_exceptions=True), 30
        )
        try:
            await asyncio.wait_for(batcher.submit(sample, 0.0), 30)
            after: BaseException | None = None
        except BaseException as e:
            after = e
        return outcomes, after

    try:
        outcomes, after = asyncio.run(scenario())
    finally:
        policy.release.set()
    for out in outcomes:
        assert isinstance(out, BatcherClosed) and "shutting down" in str(out), out
    assert isinstance(after, BatcherClosed) and "not running" in str(after), after


def test_stopping_the_server_with_a_forward_in_flight_answers_the_client_and_returns():
    policy = Misbehaving()
    srv = ServerThread(PolicyServer(policy, local_config(), policy_name="blocking")).start()
    try:
        ws = _raw(srv.url)
        policy.mode = "block"
        ws.send(wire.packb(GOOD))
        assert policy.entered.wait(60), "the forward did not start"
        srv.stop(timeout=30)  # must not wait for the blocked forward
        with pytest.raises(websockets.ConnectionClosed) as info:
            while True:  # a shutdown notice may come first; then the close
                reply = ws.recv(timeout=30)
                assert isinstance(reply, str) and "shutting down" in reply, reply
        assert info.value.rcvd is not None and info.value.rcvd.code == 1001
    finally:
        policy.release.set()
        srv.stop()
