"""Fuzzing: property tests of the wire decoder and request validation, and a live-server fuzz.

The properties: whatever bytes arrive, ``unpackb`` returns or raises ``WireError`` (never any
other exception), and ``to_canonical`` + ``validate_observation`` return or raise
``ObservationError``; every message is bounded. The live run sends 2,000 fuzzed frames to a
real server and requires a clear answer to each (the 10,000-frame run with RSS is
``benchmarks/fuzz_server.py``).
"""

from __future__ import annotations

import msgpack
import numpy as np
from fuzz_frames import fuzz_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ps_helpers import running_server

from policy_server.observations import ObservationError, to_canonical, validate_observation
from rlinf_contracts.wire import WireError, unpackb

SPEC = {"state": ("float32", (4,)), "images/front": ("uint8", (2, 2, 3))}
MAX_MESSAGE = 1024

keys = st.one_of(
    st.sampled_from(
        [
            "state",
            "images",
            "instruction",
            "prompt",
            "observation/state",
            "observation/front",
            "front",
            "__ndarray__",
        ]
    ),
    st.text(max_size=200),
    st.binary(max_size=20),
    st.just(b"__ndarray__"),
)
dtypes = st.one_of(
    st.sampled_from(["<f4", "<f8", "|u1", "<i8", "|O", "|V8", "<c8", "<U2", "<M8[s]", "f", ""]),
    st.text(max_size=300),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.lists(st.text(max_size=5), max_size=3),
)
array_maps = st.fixed_dictionaries(
    {b"__ndarray__": st.just(True)},
    optional={
        b"data": st.binary(max_size=64),
        b"dtype": dtypes,
        b"shape": st.lists(st.integers(min_value=-2, max_value=2**62), max_size=70),
    },
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(),
    st.text(max_size=50),
    st.binary(max_size=50),
)
floats64 = st.lists(
    st.floats(), min_size=4, max_size=4
).map(  # well-formed float64 state, any range
    lambda xs: {
        b"__ndarray__": True,
        b"data": np.array(xs, np.float64).tobytes(),
        b"dtype": "<f8",
        b"shape": [4],
    }
)
values = st.recursive(
    st.one_of(scalars, array_maps, floats64),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)
requests = st.dictionaries(keys, values, max_size=6)


def _bounded(e: Exception) -> None:
    assert len(str(e)) <= MAX_MESSAGE, f"unbounded message ({len(str(e))} chars)"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_decoder_raises_only_wire_errors_on_random_bytes(data):
    try:
        unpackb(data)
    except WireError as e:
        _bounded(e)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests)
def test_decoder_and_validation_raise_only_their_own_errors(request):
    frame = msgpack.packb(request, use_bin_type=True)
    try:
        obs = to_canonical(unpackb(frame), "auto", {})
        sample = validate_observation(obs, SPEC, uses_instruction=False)
    except (WireError, ObservationError) as e:
        _bounded(e)
        return
    state = sample["state"]  # accepted: exactly the declared layout, finite after the cast
    assert state.dtype == np.float32 and state.shape == (4,) and np.isfinite(state).all()
    assert sample["images"]["front"].dtype == np.uint8


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=4, max_size=4))
def test_float64_state_is_accepted_only_when_finite_in_float32(xs):
    obs = {"state": np.array(xs, np.float64), "images": {"front": np.zeros((2, 2, 3), np.uint8)}}
    finite32 = bool(np.all(np.abs(np.array(xs)) <= np.finfo(np.float32).max))
    try:
        sample = validate_observation(obs, SPEC, uses_instruction=False)
    except ObservationError as e:
        assert not finite32 and "after conversion to float32" in str(e)
    else:
        assert finite32 and np.isfinite(sample["state"]).all()


def test_live_server_answers_2000_fuzzed_frames_clearly():
    with running_server() as srv:
        report = fuzz_server(srv.url, frames=2000, seed=15, timeout_s=10)
        assert report.ok, report.failures[:10]
        assert (
            report.frames == 2000
            and report.outcomes["bad_request"] > 1500
            and report.outcomes["actions"] > 0
        )
        assert srv.server.metrics.errors["bad_request_unexpected"] == 0
        # an unrelated server is unaffected, and this one still serves
        with running_server() as other:
            assert other.server.metrics.requests == 0
        assert fuzz_server(srv.url, frames=1, seed=3).ok
