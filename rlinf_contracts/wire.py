"""The one wire codec: msgpack with numpy arrays, byte-compatible with ``openpi-client``.

Why a codec of our own instead of importing openpi's: the robot PC, the policy server and the
learner's transition ingest all speak it, and a robot PC should need only ``numpy`` and
``msgpack`` (this module imports nothing else). Why this format: msgpack is schema-free and safe
(no pickle: decoding can never execute code), and openpi clients already speak it.

Layout (see REFERENCE.md §1):

- ``str`` travels as msgpack str, ``bytes`` as bin (``use_bin_type=True``).
- A numpy array is a map with *bytes* keys ``b"__ndarray__": True``, ``b"data"`` (C-order raw
  bytes), ``b"dtype"`` (``arr.dtype.str``, e.g. ``"<f4"``) and ``b"shape"`` (list of ints).
- A numpy scalar is ``b"__npgeneric__": True``, ``b"data"`` (``item()``), ``b"dtype"``.
- dtype kinds ``V`` (void/structured), ``O`` (object) and ``c`` (complex) are refused.
- Decoded arrays are read-only views on the received bytes (no copy); tuples come back as lists.

Unlike openpi's decoder, a malformed array map raises :class:`WireError` naming what is wrong
(size mismatch, unknown dtype), so a server can answer a bad frame instead of crashing. Error
messages never echo unbounded input: every value quoted in one is cut by :func:`clip`.

>>> import numpy as np
>>> frame = packb({"state": np.arange(3, dtype=np.float32), "prompt": "pick"})
>>> obs = unpackb(frame)
>>> obs["state"], obs["state"].flags.writeable, obs["prompt"]
(array([0., 1., 2.], dtype=float32), False, 'pick')
>>> unpackb(packb({"n": np.int64(7)}))["n"]
np.int64(7)
>>> unpackb(b"\\xc1")
Traceback (most recent call last):
...
rlinf_contracts.wire.WireError: frame is not valid msgpack: ...
>>> packb(np.zeros(2, dtype=np.complex64))
Traceback (most recent call last):
...
rlinf_contracts.wire.WireError: cannot encode arrays of dtype complex64 (kind 'c'): ...
>>> unpackb(packb({"s": {b"__ndarray__": True, b"dtype": "x" * 10**6, b"shape": [1],
...                       b"data": b""}}))
Traceback (most recent call last):
...
rlinf_contracts.wire.WireError: array map has an invalid dtype
'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…(1000000 long)
"""

from __future__ import annotations

import math
from typing import Any, cast

import msgpack
import numpy as np

__all__ = [
    "WireError",
    "packb",
    "unpackb",
    "Packer",
    "pack_array",
    "unpack_array",
    "clip",
    "describe_unpack_error",
]

_REFUSED_KINDS = frozenset("VOc")
MAX_NDIM = 32  # numpy's own limit is 64; no observation comes close
CLIP_CHARS = 64
# shortest API key / weights token accepted: the policy server refuses shorter ones, and a learner
# that pushes weights checks its token against the same rule before it trains
MIN_SECRET_CHARS = 8


def clip(value: Any, limit: int = CLIP_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, for quoting untrusted input in a message.

    >>> clip("k" * 100, 12)
    "'kkkkkkkkk…(100 long)"
    >>> clip(b"state")
    "b'state'"
    """
    if isinstance(value, (str, bytes, bytearray, list, tuple)) and len(value) > limit:
        # repr of a huge value is itself huge: quote a prefix and say how long the value was
        return f"{repr(value[:limit])[: limit - 2]}…({len(value)} long)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 2]}…({len(text)} chars)"


class WireError(ValueError):
    """A frame that cannot be encoded or decoded; the message says which part and why."""


def pack_array(obj: Any) -> Any:
    """msgpack ``default`` hook: numpy arrays and scalars -> byte-keyed maps."""
    if isinstance(obj, (np.ndarray, np.generic)):
        if obj.dtype.kind in _REFUSED_KINDS:
            raise WireError(
                f"cannot encode arrays of dtype {obj.dtype} (kind {obj.dtype.kind!r}): "
                "object, structured and complex arrays are not part of the wire format; "
                "convert to a numeric or bool dtype"
            )
        if isinstance(obj, np.ndarray):
            return {
                b"__ndarray__": True,
                b"data": obj.tobytes(),
                b"dtype": obj.dtype.str,
                b"shape": list(obj.shape),
            }
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise WireError(f"cannot encode object of type {type(obj).__name__} on the wire (no pickle)")


def _dtype(spec: Any) -> np.dtype:
    # numpy also builds dtypes from lists / dicts: never from the wire
    if not isinstance(spec, str):
        raise WireError(
            f"array map field 'dtype' must be a dtype string like '<f4', got {type(spec).__name__}"
        )
    try:
        dtype = np.dtype(spec)
    except (TypeError, ValueError, SyntaxError):
        raise WireError(f"array map has an invalid dtype {clip(spec)}") from None
    if dtype.kind in _REFUSED_KINDS:
        raise WireError(f"array map has refused dtype {clip(spec)} (kind {dtype.kind!r})")
    return dtype


def _shape(shape: Any) -> tuple[int, ...]:
    if not isinstance(shape, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise WireError(f"array map field 'shape' must be a list of ints >= 0, got {clip(shape)}")
    if len(shape) > MAX_NDIM:
        raise WireError(f"array map field 'shape' has {len(shape)} dimensions; at most {MAX_NDIM}")
    return tuple(shape)


def unpack_array(obj: dict[Any, Any]) -> Any:
    """msgpack ``object_hook``: byte-keyed array maps -> read-only numpy arrays / scalars."""
    if b"__ndarray__" in obj:
        data = obj.get(b"data")
        dtype, shape = _dtype(obj.get(b"dtype")), _shape(obj.get(b"shape"))
        if not isinstance(data, bytes):
            raise WireError(f"array map field 'data' must be bytes, got {type(data).__name__}")
        expected = math.prod(shape) * dtype.itemsize
        if len(data) != expected:
            raise WireError(
                f"array map data has {len(data)} bytes but shape {clip(list(shape))} of "
                f"{dtype.str} needs {clip(expected, 24)}"
            )
        try:
            return np.ndarray(buffer=data, dtype=dtype, shape=shape)
        except (TypeError, ValueError) as e:  # e.g. a zero-size dtype with an absurd shape
            raise WireError(
                f"array map cannot be built ({type(e).__name__}: {clip(str(e))})"
            ) from None
    if b"__npgeneric__" in obj:
        dtype, data = _dtype(obj.get(b"dtype")), obj.get(b"data")
        if not isinstance(data, (int, float, bool, str, bytes)):
            raise WireError(f"scalar map field 'data' must be a number, got {type(data).__name__}")
        try:
            with np.errstate(all="ignore"):
                return dtype.type(data)
        except (TypeError, ValueError, OverflowError):
            raise WireError(f"scalar map data {clip(data)} is not a valid {dtype}") from None
    return obj


def packb(obj: Any) -> bytes:
    """Encode ``obj`` (dicts, lists, str, bytes, numbers, numpy arrays/scalars) to one frame."""
    try:
        # packb returns the frame; only a Packer built with autoreset=False returns None
        return cast(bytes, msgpack.packb(obj, default=pack_array, use_bin_type=True))
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError) as e:
        raise WireError(f"cannot encode frame: {e}") from None


# msgpack's exceptions for garbage input, and what each means: several carry no message at all
_MSGPACK_ERRORS: tuple[tuple[type[BaseException], str], ...] = (
    (msgpack.exceptions.StackError, "nesting too deep"),
    (msgpack.exceptions.FormatError, "not a msgpack type byte (0xc1 or a reserved code)"),
    (msgpack.exceptions.ExtraData, "extra bytes after the first object"),
    (UnicodeDecodeError, "a str is not valid utf-8"),
)


def describe_unpack_error(e: BaseException) -> str:
    """What a msgpack decoding error means, never empty (``StackError`` and ``FormatError``
    have no message of their own), with the exception's type for searching.

    >>> describe_unpack_error(msgpack.exceptions.StackError())
    'nesting too deep (StackError)'
    >>> describe_unpack_error(ValueError("Unpack failed: incomplete input"))
    "incomplete or truncated frame (ValueError: 'Unpack failed: incomplete input')"
    >>> describe_unpack_error(TypeError())
    'TypeError, with no detail'
    """
    name = type(e).__name__
    for kind, meaning in _MSGPACK_ERRORS:
        if isinstance(e, kind):
            return f"{meaning} ({name})"
    text = str(e)
    if "incomplete input" in text:
        return f"incomplete or truncated frame ({name}: {clip(text)})"
    return f"{name}: {clip(text)}" if text.strip() else f"{name}, with no detail"


def unpackb(data: bytes) -> Any:
    """Decode one frame; any malformation raises :class:`WireError` (never another type), whose
    message says what was wrong.

    >>> unpackb(b"\\x91" * 2000 + b"\\xc0")
    Traceback (most recent call last):
    ...
    rlinf_contracts.wire.WireError: frame is not valid msgpack: nesting too deep (StackError)
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"expected a binary frame, got {type(data).__name__}")
    try:
        return msgpack.unpackb(data, object_hook=unpack_array)
    except WireError:
        raise
    except Exception as e:  # msgpack raises several unrelated types for garbage input
        raise WireError(f"frame is not valid msgpack: {describe_unpack_error(e)}") from None


class Packer:
    """Reusable encoder (saves re-creating msgpack's packer per frame on hot paths).

    >>> Packer().pack({"a": 1}) == packb({"a": 1})
    True
    """

    def __init__(self) -> None:
        self._packer = msgpack.Packer(default=pack_array, use_bin_type=True)

    def pack(self, obj: Any) -> bytes:
        try:
            return self._packer.pack(obj)
        except WireError:
            self._packer.reset()
            raise
        except (TypeError, ValueError, OverflowError) as e:
            self._packer.reset()
            raise WireError(f"cannot encode frame: {e}") from None
