"""The PyPI openpi-client must work against our server unchanged."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
from openpi_client import msgpack_numpy
from openpi_client.action_chunk_broker import ActionChunkBroker
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from ps_helpers import LinearPolicy, expected_actions, running_server

from rlinf_contracts import wire

pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning")


def test_openpi_client_round_trip_canonical_and_libero_layouts():
    policy = LinearPolicy(state_dim=8, cameras={"image": (8, 8), "wrist_image": (8, 8)})
    with running_server(policy) as srv:
        client = WebsocketClientPolicy(host="127.0.0.1", port=srv.port)
        meta = client.get_server_metadata()
        assert meta["action_dim"] == 2 and meta["chunk"] == 3 and meta["weight_version"] == 0
        assert meta["observation_spec"]["images/image"] == {"dtype": "uint8", "shape": [8, 8, 3]}
        state = np.linspace(-1, 1, 8).astype(np.float64)  # robots often send float64: cast
        img = np.zeros((8, 8, 3), np.uint8)
        libero = {
            "observation/state": state,
            "observation/image": img,
            "observation/wrist_image": img,
            "prompt": "pick up the cube",
        }
        out = client.infer(libero)
        np.testing.assert_allclose(out["actions"], expected_actions(state, 0, 3, 2), rtol=1e-6)
        assert out["actions"].dtype == np.float32 and out["weight_version"] == 0
        assert {"infer_ms", "queue_ms", "batch_size"} <= set(out["server_timing"])
        canonical = {
            "state": state.astype(np.float32),
            "images": {"image": img, "wrist_image": img},
        }
        np.testing.assert_allclose(client.infer(canonical)["actions"], out["actions"], rtol=1e-6)
        broker = ActionChunkBroker(client, action_horizon=3)
        steps = [broker.infer(libero)["actions"] for _ in range(4)]
        assert all(s.shape == (2,) for s in steps)
        client._ws.close()


def test_healthz_and_metrics_over_plain_http():
    with running_server() as srv:
        base = f"http://127.0.0.1:{srv.port}"
        with urllib.request.urlopen(base + "/healthz", timeout=5) as r:
            assert r.status == 200
        client = WebsocketClientPolicy(host="127.0.0.1", port=srv.port)
        for _ in range(3):
            client.infer({"state": np.zeros(4, np.float32)})
        client._ws.close()
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            text = r.read().decode()
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert "rlinf_policy_requests_total 3" in text
        assert 'rlinf_policy_batch_size_bucket{le="1"} 3' in text
        assert "rlinf_policy_weight_version 0" in text
        assert 'rlinf_policy_latency_ms{quantile="0.99"}' in text


def test_wire_is_byte_identical_to_openpi_codec():
    obs = {
        "a": np.arange(6, dtype=np.int16).reshape(2, 3),
        "b": np.float32(1.5),
        "s": "x",
        "raw": b"\x00\x01",
        "nested": {"img": np.zeros((2, 2, 3), np.uint8)},
    }
    assert wire.packb(obs) == msgpack_numpy.packb(obs)
    back = wire.unpackb(msgpack_numpy.packb(obs))
    np.testing.assert_array_equal(back["a"], obs["a"])
    assert back["b"] == np.float32(1.5) and back["raw"] == b"\x00\x01"
    theirs = msgpack_numpy.unpackb(wire.packb(obs))
    np.testing.assert_array_equal(theirs["nested"]["img"], obs["nested"]["img"])
