"""Real-time chunking's committed prefix over the wire: client -> policy server -> ``infer``.

The policy client's RTC sends ``rtc_prefix`` [P, A] and ``rtc_inference_delay`` with an
observation; the server validates them (errors name the key), batches them per sample and hands
them to a policy that lists them in ``infer_extras`` — and drops them for any other policy.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import torch

from policy_server.background import ServerThread
from policy_server.client import PolicyClient, PolicyRequestError
from policy_server.config import ServerConfig
from policy_server.server import PolicyServer
from rlinf_contracts.spec import RobotSpec

A, CHUNK = 3, 5
STATE = np.array([0.1, 0.2], np.float32)


class EchoPrefixPolicy:
    """actions = the prefix rows (then zeros), + delay / 100; records every batch it was given."""

    def __init__(self, accepts: bool = True) -> None:
        self.robot_spec = RobotSpec.raw(2, A, CHUNK)
        self.infer_extras = ("rtc_prefix", "rtc_inference_delay") if accepts else ()
        self.batches: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.batches.append(obs)
        b = len(obs["state"])
        out = np.zeros((b, CHUNK, A), np.float32)
        if "rtc_prefix" in obs:
            p = obs["rtc_prefix"]
            out[:, : p.shape[1]] = p[:, :CHUNK]
        out += obs.get("rtc_inference_delay", 0) / 100.0
        return {"actions": out}


def _server(policy: Any, **cfg: Any) -> ServerThread:
    return ServerThread(PolicyServer(policy, ServerConfig(host="127.0.0.1", port=0, **cfg)))


def test_the_prefix_and_delay_reach_a_policy_that_accepts_them():
    policy = EchoPrefixPolicy()
    prefix = (
        np.arange(6, dtype=np.float64).reshape(2, A) / 10
    )  # float64 on the wire: cast to float32
    with _server(policy) as srv, PolicyClient(srv.url) as client:
        out = client.infer(
            {"state": STATE, "rtc_prefix": prefix, "rtc_inference_delay": np.int64(2)}
        )
        plain = client.infer({"state": STATE})
    got = policy.batches[0]
    assert got["rtc_prefix"].shape == (1, 2, A) and got["rtc_prefix"].dtype == np.float32
    assert got["rtc_inference_delay"] == 2 and type(got["rtc_inference_delay"]) is int
    np.testing.assert_allclose(out["actions"][:2], prefix + 0.02, rtol=1e-6)
    np.testing.assert_allclose(out["actions"][2:], 0.02, rtol=1e-6)
    assert "rtc_prefix" not in policy.batches[1] and np.all(plain["actions"] == 0)


def test_a_policy_that_does_not_declare_them_never_sees_them():
    policy = EchoPrefixPolicy(accepts=False)
    with _server(policy) as srv, PolicyClient(srv.url) as client:
        # not even validated: an RTC client works against any server
        out = client.infer(
            {"state": STATE, "rtc_prefix": np.ones((9, 7)), "rtc_inference_delay": -3}
        )
    assert set(policy.batches[0]) == {"state", "images", "instruction"}
    assert np.all(out["actions"] == 0)


@pytest.mark.parametrize(
    "extra, match",
    [
        (
            {"rtc_prefix": np.ones((2, A + 1))},
            r"'rtc_prefix' has shape \(2, 4\), expected \[P, 3\]",
        ),
        ({"rtc_prefix": np.ones(A)}, r"'rtc_prefix' has shape \(3,\), expected \[P, 3\]"),
        ({"rtc_prefix": "0.1,0.2"}, r"'rtc_prefix' must be a float array \[P, 3\]"),
        ({"rtc_prefix": np.full((1, A), np.nan)}, r"'rtc_prefix' contains NaN or inf"),
        ({"rtc_inference_delay": -1}, r"'rtc_inference_delay' must be an integer >= 0 .*got -1"),
        ({"rtc_inference_delay": 1.5}, r"'rtc_inference_delay' must be an integer >= 0 .*got 1.5"),
        (
            {"rtc_inference_delay": True},
            r"'rtc_inference_delay' must be an integer >= 0 .*got True",
        ),
    ],
)
def test_bad_extras_are_refused_naming_the_key(extra: dict[str, Any], match: str):
    policy = EchoPrefixPolicy()
    with _server(policy) as srv, PolicyClient(srv.url) as client:
        with pytest.raises(PolicyRequestError, match=match):
            client.infer({"state": STATE, **extra})
        assert client.infer({"state": STATE})["actions"].shape == (
            CHUNK,
            A,
        )  # the connection still serves
    assert len(policy.batches) == 1  # the bad request never reached the policy


def test_concurrent_clients_with_different_prefixes_each_get_their_own():
    """Samples batch only with samples of the same extras signature; each answer is its own."""
    policy = EchoPrefixPolicy()
    results: dict[int, np.ndarray] = {}
    barrier = threading.Barrier(4)

    def run(i: int, url: str) -> None:
        with PolicyClient(url) as client:
            extra = (
                {}
                if i == 0
                else {"rtc_prefix": np.full((i, A), float(i)), "rtc_inference_delay": i % 2}
            )
            barrier.wait()
            for _ in range(5):
                results[i] = client.infer({"state": STATE, **extra})["actions"]

    with _server(policy, max_batch=8, max_wait_ms=20.0) as srv:
        threads = [threading.Thread(target=run, args=(i, srv.url)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert np.all(results[0] == 0)
    for i in (1, 2, 3):
        np.testing.assert_allclose(results[i][:i], i + (i % 2) / 100.0, rtol=1e-6)
        np.testing.assert_allclose(results[i][i:], (i % 2) / 100.0, atol=1e-7)
    for batch in policy.batches:  # every forward got one consistent group
        if "rtc_prefix" in batch:
            assert batch["rtc_prefix"].shape[0] == len(batch["state"])


def test_a_flow_vla_inpaints_the_prefix_sent_over_the_wire():
    """The tiny π0 adapter (real architecture, random weights) served: a prefix sent by a client
    pulls the chunk's first rows onto it, as the adapter's local RTC test shows in-process."""
    pytest.importorskip("transformers")
    from test_adapter_tiny_models import pi_cfg  # the tiny π0 config of the adapter tests

    from learner.models.adapters import build_adapter
    from learner.models.adapters.common import serve

    torch.manual_seed(0)
    served = serve(build_adapter("pi0", cfg=pi_cfg(False)(0)))
    assert served.infer_extras == ("rtc_prefix", "rtc_inference_delay")
    rng = np.random.default_rng(0)
    cams = {c.name: (c.height, c.width) for c in served.robot_spec.cameras}
    obs = {
        "state": rng.normal(0, 0.3, served.robot_spec.state_dim).astype(np.float32),
        "images": {
            c: rng.integers(0, 255, (h, w, 3), dtype=np.uint8) for c, (h, w) in cams.items()
        },
        "instruction": "pick up the red cube",
    }
    prefix = np.full((4, 7), 0.3, np.float32)
    with _server(served) as srv, PolicyClient(srv.url) as client:
        torch.manual_seed(
            5
        )  # the same initial noise for both (the forward thread shares the generator)
        free = client.infer(obs)["actions"]
        torch.manual_seed(5)
        guided = client.infer({**obs, "rtc_prefix": prefix, "rtc_inference_delay": 3})["actions"]
    err_free, err_guided = np.abs(free[:3] - 0.3).mean(), np.abs(guided[:3] - 0.3).mean()
    assert err_guided < 0.5 * err_free, (err_free, err_guided)
