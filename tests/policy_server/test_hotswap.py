"""Weight hot-swap: atomic between batches, no request dropped, pushes authenticated."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
from ps_helpers import TOKEN, LinearPolicy, expected_actions, running_server, version_weights

from policy_server.client import PolicyClient
from policy_server.push import WeightPusher, WeightPushError, push_weights
from rlinf_contracts.weight_blob import weights_to_bytes

NUM_CLIENTS, NUM_SWAPS = 8, 20


def _client_loop(url: str, seed: int, stop: threading.Event, log: list, errors: list) -> None:
    rng = np.random.default_rng(seed)
    try:
        with PolicyClient(url, timeout_s=30) as client:
            for _ in range(5000):  # bounded; normally ends by `stop`
                state = rng.uniform(-1, 1, 4).astype(np.float32)
                out = client.infer({"state": state})
                log.append(
                    (
                        state,
                        out["weight_version"],
                        out["actions"],
                        out["server_timing"]["batch_size"],
                    )
                )
                if stop.is_set():
                    break
    except Exception as e:
        errors.append(repr(e))


def test_concurrent_clients_with_20_swaps_every_response_matches_its_version():
    policy = LinearPolicy()
    with running_server(policy, weights_token=TOKEN, max_batch=8, max_wait_ms=5) as srv:
        stop = threading.Event()
        logs: list[list] = [[] for _ in range(NUM_CLIENTS)]
        errors: list[str] = []
        threads = [
            threading.Thread(target=_client_loop, args=(srv.url, i, stop, logs[i], errors))
            for i in range(NUM_CLIENTS)
        ]
        for t in threads:
            t.start()
        acks = []
        with WeightPusher(srv.url, token=TOKEN) as pusher:
            assert pusher.metadata.weight_version == 0
            for v in range(1, NUM_SWAPS + 1):
                time.sleep(0.03)
                acks.append(pusher.push(version_weights(policy, v), version=v))
        # every client goes on until it has been answered by the last weights (polled: a client
        # thread may get no CPU for a while on a busy machine), then all stop
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and not errors
            and not all(log and log[-1][1] == NUM_SWAPS for log in logs)
        ):
            time.sleep(0.02)
        stop.set()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert [a.version for a in acks] == list(range(1, NUM_SWAPS + 1))
        seen = set()
        for log in logs:
            versions = [v for _, v, _, _ in log]
            assert versions == sorted(versions), "a client saw weights go backwards"
            assert versions[-1] == NUM_SWAPS
            for state, version, actions, _ in log:
                np.testing.assert_allclose(
                    actions, expected_actions(state, version), rtol=1e-5, atol=1e-6
                )
            seen.update(versions)
        assert len(seen) >= NUM_SWAPS // 2  # swaps really happened while clients were running
        assert max(b for log in logs for *_, b in log) > 1  # and requests really were batched
        assert srv.server.metrics.weight_swaps == NUM_SWAPS
        assert srv.server.metrics.requests == sum(len(log) for log in logs)  # none dropped


def test_unauthenticated_or_wrong_token_push_is_refused_and_logged(caplog):
    policy = LinearPolicy()
    data = weights_to_bytes(version_weights(policy, 1))
    with running_server(policy, weights_token=TOKEN) as srv:
        with pytest.raises(WeightPushError, match="HTTP 401"):
            _push_without_header(srv.url)
        with pytest.raises(WeightPushError, match="HTTP 403.*wrong"):
            push_weights(srv.url, data, token="wrong-token-000")
        assert srv.server.slot.version == 0
        assert srv.server.metrics.refused_pushes == 2
    assert "refused weight push" in caplog.text
    with running_server(LinearPolicy()) as srv:  # no token configured: pushes disabled
        with pytest.raises(WeightPushError, match="HTTP 403.*disabled"):
            push_weights(srv.url, data, token=TOKEN)


def _push_without_header(url: str) -> None:
    import websockets
    import websockets.sync.client

    try:
        with websockets.sync.client.connect(url + "/weights", open_timeout=5):
            pass
    except websockets.InvalidStatus as e:
        raise WeightPushError(f"HTTP {e.response.status_code}") from None


def test_bad_pushes_are_refused_with_the_reason_and_serving_continues():
    policy = LinearPolicy()
    with (
        running_server(policy, weights_token=TOKEN) as srv,
        WeightPusher(srv.url, token=TOKEN) as pusher,
    ):
        with pytest.raises(WeightPushError, match="not a valid safetensors"):
            pusher.push(b"garbage bytes", version=1)
        with pytest.raises(WeightPushError, match="lin.bias"):
            pusher.push({"lin.weight": torch.zeros(6, 4)}, version=1)  # missing key
        with pytest.raises(WeightPushError, match="size mismatch for lin.weight"):
            pusher.push({"lin.weight": torch.zeros(5, 4), "lin.bias": torch.zeros(6)}, version=1)
        assert pusher.push(version_weights(policy, 3), version=3).version == 3
        with pytest.raises(WeightPushError, match="stale weight version 2"):
            pusher.push(version_weights(policy, 2), version=2)
        assert pusher.push(version_weights(policy, 4)).version == 4  # no version: current + 1
        with PolicyClient(srv.url) as client:
            state = np.ones(4, np.float32)
            out = client.infer({"state": state})
            assert out["weight_version"] == 4
            np.testing.assert_allclose(out["actions"], expected_actions(state, 4), rtol=1e-6)
            assert client.metadata.weight_version == 4


def test_weights_path_has_its_own_frame_limit():
    policy = LinearPolicy(state_dim=4000)  # 96 kB of weights, far above the 4 kB observation limit
    with running_server(
        policy, weights_token=TOKEN, max_frame_bytes=4096, max_weights_bytes=1 << 20
    ) as srv:
        assert push_weights(srv.url, version_weights(policy, 1), token=TOKEN).version == 1
    with running_server(
        policy, weights_token=TOKEN, max_frame_bytes=4096, max_weights_bytes=8192
    ) as srv:
        with pytest.raises(WeightPushError, match="no ack.*1009|1009.*no ack|exceeds limit"):
            push_weights(srv.url, version_weights(policy, 1), token=TOKEN)
