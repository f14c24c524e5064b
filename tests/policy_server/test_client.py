"""Client library: sync/async clients, reconnect with back-off, chunk broker."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from ps_helpers import LinearPolicy, expected_actions, local_config, running_server

from learner.serving import TorchPolicy
from policy_server.background import ServerThread
from policy_server.broker import ActionChunkBroker
from policy_server.client import AsyncPolicyClient, PolicyClient, PolicyServerUnavailable
from policy_server.messages import ServerMetadata
from policy_server.server import PolicyServer

STATE = np.array([0.5, -0.5, 0.25, 0.0], np.float32)


def test_sync_client_reconnects_after_server_restart():
    first = ServerThread(PolicyServer(TorchPolicy(LinearPolicy()), local_config())).start()
    port = first.port
    client = PolicyClient(first.url, backoff_s=0.1, max_backoff_s=0.4, retries=20)
    assert isinstance(client.metadata, ServerMetadata) and client.metadata.chunk == 3
    assert client.infer({"state": STATE})["weight_version"] == 0
    first.stop()
    second = PolicyServer(TorchPolicy(LinearPolicy()), local_config(port=port), weight_version=7)
    starter = threading.Timer(0.5, lambda: ServerThread(second).start())
    starter.start()
    try:
        out = client.infer({"state": STATE})  # blocks through the outage, then resends
        assert out["weight_version"] == 7 and client.reconnects == 1
        np.testing.assert_allclose(out["actions"], expected_actions(STATE, 0), rtol=1e-6)
    finally:
        starter.join()
        client.close()
        asyncio.run_coroutine_threadsafe(second.stop(), second._batcher._task.get_loop()).result(10)


def test_sync_client_gives_up_with_a_clear_error():
    with running_server() as srv:
        url = srv.url
    with pytest.raises(PolicyServerUnavailable, match="unreachable after 2 retries"):
        PolicyClient(url, retries=2, backoff_s=0.05, connect_timeout_s=1)


def test_async_clients_are_batched_together():
    async def run(url: str) -> list[dict]:
        clients = [await AsyncPolicyClient.connect(url) for _ in range(4)]
        outs = []
        for _ in range(5):
            outs += await asyncio.gather(
                *(c.infer({"state": STATE * i}) for i, c in enumerate(clients))
            )
        for c in clients:
            await c.close()
        return outs

    with running_server(max_wait_ms=50) as srv:
        outs = asyncio.run(run(srv.url))
    for k, out in enumerate(outs):
        np.testing.assert_allclose(out["actions"], expected_actions(STATE * (k % 4), 0), rtol=1e-6)
    assert max(o["server_timing"]["batch_size"] for o in outs) == 4


def test_broker_executes_a_chunk_per_request_and_honours_execute_horizon():
    with running_server() as srv, PolicyClient(srv.url) as client:
        broker = ActionChunkBroker(client)
        actions = [broker.act({"state": STATE}) for _ in range(6)]
        assert srv.server.metrics.requests == 2 and all(a.shape == (2,) for a in actions)
        receding = ActionChunkBroker(client, execute_horizon=1)
        for _ in range(3):
            receding.act({"state": STATE})
        assert srv.server.metrics.requests == 5 and receding.weight_version == 0
