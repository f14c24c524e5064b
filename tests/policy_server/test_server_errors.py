"""Bad input gets a clear error naming the problem; the server keeps serving everyone else."""

from __future__ import annotations

import asyncio

import msgpack
import numpy as np
import pytest
import websockets
import websockets.sync.client
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from ps_helpers import LinearPolicy, expected_actions, running_server

from learner.serving import TorchPolicy
from policy_server.batching import DynamicBatcher, InferenceError
from policy_server.client import PolicyClient, PolicyRequestError
from policy_server.hotswap import ModelSlot
from policy_server.metrics import ServerMetrics
from rlinf_contracts import wire

pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning")

GOOD = {"state": np.array([0.1, 0.2, 0.3, 0.4], np.float32), "instruction": "reach"}


def _raw(url: str) -> websockets.sync.client.ClientConnection:
    ws = websockets.sync.client.connect(url, max_size=None, compression=None)
    wire.unpackb(ws.recv(timeout=5))  # metadata frame
    return ws


BAD_FRAMES = [
    (
        b"\xc1\xff\x00",
        "not valid msgpack: not a msgpack type byte (0xc1 or a reserved code) (FormatError)",
    ),
    (b"\x91" * 5000 + b"\xc0", "not valid msgpack: nesting too deep (StackError)"),
    ("a text frame", "binary msgpack"),
    (msgpack.packb([1, 2, 3]), "must be a msgpack map"),
    (wire.packb({"foo": np.zeros(4, np.float32)}), "'state' is missing"),
    (wire.packb({"state": "0.1 0.2"}), "'state' must be a numpy array"),
    (wire.packb({"state": np.zeros(4, np.int64)}), "'state' has dtype int64, expected float32"),
    (wire.packb({"state": np.zeros(5, np.float32)}), "'state' has shape (5,), expected (4,)"),
    (wire.packb({"state": np.array([0, np.nan, 0, 0], np.float32)}), "'state' contains NaN"),
    (
        msgpack.packb(
            {"state": {b"__ndarray__": True, b"data": b"\x00" * 3, b"dtype": "<f4", b"shape": [4]}},
            use_bin_type=True,
        ),
        "has 3 bytes but shape [4]",
    ),
    (
        msgpack.packb(
            {"state": {b"__ndarray__": True, b"data": b"", b"dtype": "|O", b"shape": [0]}},
            use_bin_type=True,
        ),
        "refused dtype",
    ),
]


def test_malformed_frames_each_get_a_clear_error_and_others_keep_being_served():
    with running_server() as srv:
        bad = _raw(srv.url)
        good = PolicyClient(srv.url, timeout_s=10)
        for frame, expected in BAD_FRAMES:
            bad.send(frame)
            reply = bad.recv(timeout=10)
            assert isinstance(reply, str) and expected in reply, (expected, reply)
            out = good.infer(GOOD)  # another client, unaffected
            np.testing.assert_allclose(
                out["actions"], expected_actions(GOOD["state"], 0), rtol=1e-6
            )
        bad.send(wire.packb(GOOD))  # the offending connection itself is still usable
        np.testing.assert_allclose(
            wire.unpackb(bad.recv(timeout=10))["actions"],
            expected_actions(GOOD["state"], 0),
            rtol=1e-6,
        )
        with pytest.raises(PolicyRequestError, match="'state' has shape"):
            good.infer({"state": np.zeros(3, np.float32)})
        bad.close()
        good.close()
        text = srv.server.metrics.render(0, 0)
        assert f'rlinf_policy_errors_total{{kind="bad_request"}} {len(BAD_FRAMES) + 1}' in text


def test_oversized_frame_closes_with_1009_and_server_keeps_serving():
    with running_server(max_frame_bytes=4096) as srv:
        bad = _raw(srv.url)
        bad.send(wire.packb({"state": np.zeros(4, np.float32), "junk": b"x" * 10_000}))
        with pytest.raises(websockets.ConnectionClosed) as info:
            bad.recv(timeout=10)
        assert info.value.rcvd.code == 1009 and "exceeds limit" in info.value.rcvd.reason
        with PolicyClient(srv.url) as good:
            assert good.infer(GOOD)["actions"].shape == (3, 2)


def test_inference_error_is_a_text_frame_then_close_1011():
    with running_server() as srv:
        ws = _raw(srv.url)
        ws.send(wire.packb({"state": np.array([999, 0, 0, 0], np.float32)}))
        reply = ws.recv(timeout=10)
        assert isinstance(reply, str) and "poisoned observation" in reply
        with pytest.raises(websockets.ConnectionClosed) as info:
            ws.recv(timeout=10)
        assert info.value.rcvd.code == 1011
        with PolicyClient(srv.url) as good:
            assert good.infer(GOOD)["weight_version"] == 0


def test_a_failing_sample_does_not_fail_its_batch_mates():
    async def scenario():
        metrics = ServerMetrics()
        batcher = DynamicBatcher(
            ModelSlot(TorchPolicy(LinearPolicy())),
            metrics,
            max_batch=8,
            max_wait_ms=200,
            open_clients=lambda: 3,
        )
        batcher.start()
        samples = [
            {"state": np.array([v, 0, 0, 0], np.float32), "images": {}, "instruction": ""}
            for v in (1.0, 999.0, 2.0)
        ]
        results = await asyncio.gather(
            *(batcher.submit(s, 0.0) for s in samples), return_exceptions=True
        )
        await batcher.stop()
        return results, metrics

    results, metrics = asyncio.run(scenario())
    assert isinstance(results[1], InferenceError) and "poisoned" in str(results[1])
    for i, v in ((0, 1.0), (2, 2.0)):
        np.testing.assert_allclose(
            results[i].actions, expected_actions(np.array([v, 0, 0, 0]), 0), rtol=1e-6
        )
    assert metrics.batches == 2  # the failed batch of 3 was retried one by one; 2 succeeded


def test_connection_limit_and_api_key():
    with running_server(max_connections=2, api_key="secret-key-1") as srv:
        with pytest.raises(websockets.InvalidStatus) as info:
            WebsocketClientPolicy(host="127.0.0.1", port=srv.port)  # no key
        assert info.value.response.status_code == 401
        a = WebsocketClientPolicy(host="127.0.0.1", port=srv.port, api_key="secret-key-1")
        assert a.infer(GOOD)["actions"].shape == (3, 2)  # a slot is held once a request was sent
        b = WebsocketClientPolicy(host="127.0.0.1", port=srv.port, api_key="secret-key-1")
        assert b.infer(GOOD)["actions"].shape == (3, 2)
        with pytest.raises(websockets.InvalidStatus) as info:
            WebsocketClientPolicy(host="127.0.0.1", port=srv.port, api_key="secret-key-1")
        assert info.value.response.status_code == 503
        assert a.infer(GOOD)["actions"].shape == (3, 2) and b.infer(GOOD)["actions"].shape == (3, 2)
        a._ws.close()
        b._ws.close()
