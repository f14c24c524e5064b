"""Malformed (and some valid) request frames, and a live-server fuzz loop that grades replies.

Used by ``test_fuzz.py`` (2,000 frames in ``make test``) and ``benchmarks/fuzz_server.py``
(10,000 frames with RSS). Frames are drawn from a seeded numpy RNG so a failure replays.
Every reply must be either an action response (for a frame that happened to be valid) or a
text frame starting ``bad request:`` of at most ``MAX_REPLY_CHARS``; an oversized frame may
instead close the connection with 1009. Anything else is a failure: no reply within the
timeout (hang), a close with another code (crash), an unclear or oversized text.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
import websockets

from policy_server.client import open_sync
from rlinf_contracts import wire

MAX_REPLY_CHARS = 1024
STATE_DIM = 4
DTYPES = [
    "<f4",
    "<f8",
    ">f8",
    "<f2",
    "|u1",
    "<i8",
    "|b1",
    "<U3",
    "|S2",
    "<M8[s]",
    "|V4",
    "|O",
    "<c8",
    "f4",
    "int",
    "",
    "x" * 300,
    "<f4" * 50,
]


def _array_map(rng: np.random.Generator) -> dict[bytes, Any]:
    dtype = DTYPES[rng.integers(len(DTYPES))]
    shape = [int(n) for n in rng.integers(0, 6, size=rng.integers(0, 4))]
    if rng.random() < 0.1:
        shape = [int(rng.integers(-3, 2**40))] * int(rng.integers(1, 70))
    nbytes = int(rng.integers(0, 64))
    if rng.random() < 0.5:
        try:
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        except (TypeError, ValueError, SyntaxError):
            pass
    out: dict[bytes, Any] = {
        b"__ndarray__": True,
        b"dtype": dtype,
        b"shape": shape,
        b"data": rng.bytes(max(0, min(nbytes, 4096))),
    }
    for k in list(out):
        if rng.random() < 0.08:
            out[k] = _scalar(rng)  # wrong type for a field
        if rng.random() < 0.05:
            del out[k]
    return out


def _scalar(rng: np.random.Generator) -> Any:
    choices: list[Callable[[], Any]] = [
        lambda: int(rng.integers(-(2**62), 2**62)),
        lambda: float(rng.normal() * 10 ** rng.integers(0, 320)),
        lambda: float("nan"),
        lambda: float("inf"),
        lambda: "s" * int(rng.integers(0, 5000)),
        lambda: rng.bytes(int(rng.integers(0, 300))),
        lambda: None,
        lambda: True,
        lambda: [],
        lambda: {},
    ]
    return choices[rng.integers(len(choices))]()


def _key(rng: np.random.Generator) -> Any:
    keys: list[Any] = [
        "state",
        "images",
        "instruction",
        "prompt",
        "observation/state",
        "observation/image",
        "observation/wrist_image",
        "k" * int(rng.integers(1, 100_000)),
        b"state",
        b"\xff\xfe",
        "images/front",
        "__ndarray__",
        b"__ndarray__",
    ]
    return keys[rng.integers(len(keys))]


def _value(rng: np.random.Generator, depth: int = 0) -> Any:
    r = rng.random()
    if r < 0.3:
        return _array_map(rng)
    if r < 0.4:  # a well-formed array, possibly out of float32 range
        scale = 10.0 ** rng.integers(0, 309)
        with np.errstate(over="ignore"):
            return wire.pack_array(rng.normal(size=STATE_DIM) * scale)
    if r < 0.5 and depth < 3:
        return {_key(rng): _value(rng, depth + 1) for _ in range(rng.integers(0, 4))}
    if r < 0.55 and depth < 3:
        return [_value(rng, depth + 1) for _ in range(rng.integers(0, 4))]
    return _scalar(rng)


def valid_request(rng: np.random.Generator) -> bytes:
    return wire.packb({"state": rng.normal(size=STATE_DIM).astype(np.float32), "prompt": "reach"})


def random_frame(rng: np.random.Generator) -> bytes | str:
    """One fuzzed frame: garbage, mutated valid frames, or random maps of keys and values."""
    kind = rng.random()
    if kind < 0.08:
        return rng.bytes(int(rng.integers(0, 2000)))
    if kind < 0.12:
        return "text frame " * int(rng.integers(0, 50))
    if kind < 0.22:  # bit flips / truncation of a valid request
        frame = bytearray(valid_request(rng))
        for _ in range(rng.integers(1, 6)):
            frame[rng.integers(len(frame))] = int(rng.integers(256))
        return bytes(frame[: rng.integers(1, len(frame) + 1)])
    if kind < 0.27:
        return valid_request(rng)
    obs = {_key(rng): _value(rng) for _ in range(rng.integers(0, 6))}
    if rng.random() < 0.3:  # openpi layout plus junk: the historical TypeError
        obs["observation/state"] = _value(rng)
    try:
        return msgpack.packb(obs, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        return rng.bytes(16)


@dataclass
class FuzzReport:
    frames: int = 0
    outcomes: Counter = field(default_factory=Counter)  # actions, bad_request, closed_1009
    failures: list[str] = field(
        default_factory=list
    )  # hang / crash / unclear, with the frame index
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures


# a reply that ends in an empty detail ("...: ''", "...: ") says that something failed but not what
_EMPTY_DETAIL = re.compile(r":\s*(''|\"\")?\s*$")


def _grade(reply: Any) -> str | None:
    """Outcome name for a good reply, None for an unclear one."""
    if isinstance(reply, str):
        clear = (
            reply.startswith("bad request: ")
            and len(reply) <= MAX_REPLY_CHARS
            and not _EMPTY_DETAIL.search(reply)
        )
        return "bad_request" if clear else None
    out = wire.unpackb(reply)
    return (
        "actions"
        if isinstance(out, dict) and np.asarray(out.get("actions")).shape == (3, 2)
        else None
    )


def fuzz_server(
    url: str,
    frames: int,
    seed: int = 0,
    timeout_s: float = 10.0,
    progress: Callable[[int], None] | None = None,
) -> FuzzReport:
    """Send ``frames`` fuzzed frames over one connection (reconnecting after a 1009 close)."""
    rng, report, t0 = np.random.default_rng(seed), FuzzReport(), time.perf_counter()
    ws = None
    for i in range(frames):
        frame = random_frame(rng)
        if ws is None:
            ws = open_sync(url, max_size=None, compression=None, open_timeout=timeout_s)
            ws.recv(timeout=timeout_s)  # metadata
        try:
            ws.send(frame)
            outcome = _grade(ws.recv(timeout=timeout_s))
            if outcome is None:
                report.failures.append(f"frame {i}: unclear reply")
            else:
                report.outcomes[outcome] += 1
        except TimeoutError:
            report.failures.append(f"frame {i}: no reply within {timeout_s} s (hang)")
            ws.close()
            ws = None
        except websockets.ConnectionClosed as e:
            code = e.rcvd.code if e.rcvd else None
            if code == 1009:
                report.outcomes["closed_1009"] += 1
            else:
                report.failures.append(f"frame {i}: connection closed with {code} (crash)")
            ws = None
        report.frames += 1
        if progress is not None:
            progress(i)
    if ws is not None:
        ws.close()
    report.seconds = time.perf_counter() - t0
    return report
