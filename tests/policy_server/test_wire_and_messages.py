"""Codec, typed messages, observation adapters/validation and server config, without a server."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from policy_server.config import ServerConfig
from policy_server.messages import MessageError, ServerMetadata, WeightAck, WeightPush
from policy_server.observations import ObservationError, collate, to_canonical, validate_observation
from rlinf_contracts import wire
from rlinf_contracts.config import ConfigError, from_dict


@pytest.mark.parametrize("dtype", ["<f4", "<f8", "<f2", "|u1", "<i8", "|b1", "<u2"])
def test_arrays_round_trip_for_every_supported_dtype(dtype):
    arr = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    back = wire.unpackb(wire.packb({"x": arr, "t": arr[:, ::2]}))  # non-contiguous slices too
    np.testing.assert_array_equal(back["x"], arr)
    np.testing.assert_array_equal(back["t"], arr[:, ::2])
    assert back["x"].dtype == arr.dtype and not back["x"].flags.writeable


def test_scalars_tuples_bytes_and_refusals():
    back = wire.unpackb(
        wire.packb({"f": np.float32(0.5), "b": np.bool_(True), "t": (1, 2), "raw": b"\x00"})
    )
    assert back == {"f": np.float32(0.5), "b": np.bool_(True), "t": [1, 2], "raw": b"\x00"}
    assert type(back["f"]) is np.float32
    for bad in (np.zeros(2, dtype=object), np.zeros(2, dtype=[("a", "<f4")]), object()):
        with pytest.raises(wire.WireError, match="cannot encode"):
            wire.packb({"x": bad})
    with pytest.raises(wire.WireError, match="shape"):
        wire.unpackb(
            wire.packb({b"__ndarray__": True, b"data": b"", b"dtype": "<f4", b"shape": "3"})
        )
    with pytest.raises(wire.WireError, match="invalid dtype"):
        wire.unpackb(
            wire.packb({b"__ndarray__": True, b"data": b"", b"dtype": "nope", b"shape": [0]})
        )
    with pytest.raises(wire.WireError, match="binary frame"):
        wire.unpackb("text")


def test_codec_imports_only_numpy_and_msgpack():
    code = (
        "import sys; import rlinf_contracts.wire, policy_server.messages; bad = [m for m in "
        "('torch', 'websockets', 'learner', 'ray') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_messages_round_trip_and_name_bad_fields():
    push = WeightPush(data=b"abc", version=3)
    assert WeightPush.from_wire(wire.unpackb(wire.packb(push.to_wire()))) == push
    ack = WeightAck(version=3, num_tensors=2, load_ms=1.5, wait_ms=0.2)
    assert WeightAck.from_wire(wire.unpackb(wire.packb(ack.to_wire()))) == ack
    with pytest.raises(MessageError, match="missing field 'data'"):
        WeightPush.from_wire({"format": "safetensors", "version": 1})
    with pytest.raises(MessageError, match="'version' must be an int"):
        WeightPush.from_wire({"format": "safetensors", "version": "7", "data": b""})
    with pytest.raises(MessageError, match="'action_dim' has type str"):
        ServerMetadata.from_wire(
            {
                "policy_name": "p",
                "observation_spec": {},
                "action_dim": "2",
                "chunk": 1,
                "weight_version": 0,
            }
        )


def test_adapters_map_openpi_and_canonical_layouts_onto_one_map():
    img = np.zeros((3, 6, 8), np.uint8)  # CHW, as openpi ALOHA clients send
    flat = to_canonical(
        {"observation/state": np.ones(2), "observation/image": img, "prompt": "hi"},
        "auto",
        {"image": "front"},
    )
    assert flat["images"]["front"].shape == (6, 8, 3) and flat["instruction"] == "hi"
    canon = to_canonical(
        {"state": np.ones(2), "images": {"cam_high": img}, "prompt": "x"},
        "auto",
        {"cam_high": "front"},
    )
    assert canon["images"]["front"].shape == (6, 8, 3) and canon["instruction"] == "x"
    spec = {"state": ("float32", (2,)), "images/front": ("uint8", (6, 8, 3))}
    sample = validate_observation(flat, spec, uses_instruction=True)
    batch = collate([sample, validate_observation(canon, spec, True)])
    assert batch["state"].shape == (2, 2) and batch["state"].dtype == np.float32
    assert batch["images"]["front"].shape == (2, 6, 8, 3) and batch["instruction"] == ["hi", "x"]
    with pytest.raises(
        ObservationError, match="'images/front' is missing \\(cameras sent: wrist\\)"
    ):
        validate_observation({"state": np.ones(2), "images": {"wrist": img}}, spec, False)
    with pytest.raises(ObservationError, match="'instruction' .* must be a string"):
        validate_observation(
            {"state": np.ones(2), "images": {"front": flat["images"]["front"]}}, spec, True
        )
    with pytest.raises(ObservationError, match="'images/front' has dtype float32, expected uint8"):
        validate_observation(
            {"state": np.ones(2), "images": {"front": np.zeros((6, 8, 3), np.float32)}}, spec, False
        )


def test_server_config_validation_names_the_key(monkeypatch):
    cfg = from_dict(ServerConfig, {"port": 9000, "max_batch": 16}, path="server")
    assert cfg.port == 9000 and cfg.max_batch == 16
    with pytest.raises(ConfigError, match="server.max_wait_ms"):
        from_dict(ServerConfig, {"max_wait_ms": -1})
    with pytest.raises(ConfigError, match="server.weights_token' must be at least 8"):
        ServerConfig(weights_token="short").validate()
    with pytest.raises(ConfigError, match="Did you mean 'server.max_batch'"):
        from_dict(ServerConfig, {"max_bach": 4}, path="server")
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN", "from-the-env-123")
    assert ServerConfig().with_env_secrets().weights_token == "from-the-env-123"
    monkeypatch.setenv(
        "RLINF_WEIGHTS_TOKEN", "wtok456"
    )  # the error says where the short secret came from
    with pytest.raises(
        ConfigError,
        match=r"server.weights_token': the secret from \$RLINF_WEIGHTS_TOKEN is shorter",
    ):
        ServerConfig().with_env_secrets()


GARBAGE = [  # (frame, what the error must say): msgpack's own exceptions often carry no message
    (b"\xc1", "not a msgpack type byte"),
    (b"\x91" * 2000 + b"\xc0", "nesting too deep"),
    (b"\x01\x02", "extra bytes"),
    (b"\x92\x01", "incomplete"),
    (b"", "incomplete"),
    (b"\xa1\xff", "utf-8"),
    (b"\x81\x91\x01\x01", "map key"),
    (b"\xdf\xff\xff\xff\xff", "exceeds"),
]


@pytest.mark.parametrize("frame, says", GARBAGE, ids=[g[1] for g in GARBAGE])
def test_every_malformed_frame_error_says_what_was_wrong(frame, says):
    with pytest.raises(wire.WireError) as info:
        wire.unpackb(frame)
    message = str(info.value)
    assert message.startswith("frame is not valid msgpack: ") and says in message, message
    assert not message.rstrip().endswith(("''", ":")), message
