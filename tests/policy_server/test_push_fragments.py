"""Weight pushes are received as wire fragments and decoded off the event loop
(policy_server.hotswap.decode_push): a push sent in fragments is applied like a whole one, a text
push is refused with the reason, and serving goes on."""

from __future__ import annotations

import threading

import numpy as np
from ps_helpers import TOKEN, LinearPolicy, expected_actions, running_server, version_weights

import policy_server.server as server_module
from policy_server.client import PolicyClient, open_sync
from policy_server.messages import WeightAck, WeightPush
from policy_server.push import weights_url
from rlinf_contracts.weight_blob import weights_to_bytes
from rlinf_contracts.wire import packb, unpackb


def test_fragmented_push_is_applied_and_text_push_refused(monkeypatch):
    threads: list[str] = []
    decode = server_module.decode_push

    def recording(parts):
        threads.append(threading.current_thread().name)
        return decode(parts)

    monkeypatch.setattr(server_module, "decode_push", recording)
    policy = LinearPolicy()
    with running_server(policy, weights_token=TOKEN) as srv:
        ws = open_sync(
            weights_url(srv.url),
            additional_headers={"Authorization": f"Bearer {TOKEN}"},
            max_size=None,
        )
        try:
            ws.recv(timeout=10)  # server metadata
            frame = packb(
                WeightPush(data=weights_to_bytes(version_weights(policy, 5)), version=5).to_wire()
            )
            n = max(1, len(frame) // 7)
            ws.send(
                bytes(frame[i : i + n]) for i in range(0, len(frame), n)
            )  # one message, >= 7 fragments
            ack = WeightAck.from_wire(unpackb(ws.recv(timeout=30)))
            assert ack.version == 5
            ws.send("not msgpack")
            reply = ws.recv(timeout=10)
            assert isinstance(reply, str) and "text frame" in reply
        finally:
            ws.close()
        with PolicyClient(srv.url) as client:
            state = np.ones(4, np.float32)
            out = client.infer({"state": state})
        assert out["weight_version"] == 5
        np.testing.assert_allclose(out["actions"], expected_actions(state, 5), rtol=1e-6)
        assert srv.server.metrics.refused_pushes == 1
    # both pushes were decoded in the weight-loading thread, not on the event loop serving robots
    assert len(threads) == 2 and all(t.startswith("policy-weights") for t in threads), threads


def test_weight_pusher_sends_large_pushes_in_fragments(monkeypatch):
    """The shipped pusher fragments a push above FRAGMENT_BYTES; the server applies it whole."""
    import policy_server.push as push_module

    monkeypatch.setattr(push_module, "FRAGMENT_BYTES", 64)  # LinearPolicy's weights are small
    sent: list[int] = []
    fragments = push_module._fragments

    def counting(frame):
        for part in fragments(frame):
            sent.append(len(part))
            yield part

    monkeypatch.setattr(push_module, "_fragments", counting)
    policy = LinearPolicy()
    with running_server(policy, weights_token=TOKEN) as srv:
        with push_module.WeightPusher(srv.url, token=TOKEN, timeout_s=30) as pusher:
            ack = pusher.push(version_weights(policy, 9), version=9)
        assert ack.version == 9
        with PolicyClient(srv.url) as client:
            state = np.ones(4, np.float32)
            out = client.infer({"state": state})
    assert len(sent) > 1 and max(sent) <= 64
    assert out["weight_version"] == 9
    np.testing.assert_allclose(out["actions"], expected_actions(state, 9), rtol=1e-6)
