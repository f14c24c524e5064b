"""How items travel through Ray: small ones inline, large ones by object-store reference.

Why this module exists: Ray moves numpy arrays zero-copy (pickle-5 out-of-band buffers
straight into the shared-memory object store) but pickles ``torch.Tensor`` through a byte
string, which costs two extra copies of every tensor. :func:`pack` swaps CPU tensors for
their numpy view before Ray sees them and :func:`unpack` swaps them back with
``torch.from_numpy``, so a tensor is copied once (into the object store) and read in place.

It also decides *how* an item is shipped. An actor call carries arguments under
:data:`INLINE_LIMIT` bytes inside the call itself, which is cheaper than an object-store round
trip; anything larger is ``ray.put`` by the producer and only its reference travels, so the
channel actor never touches the bytes.

Only dicts, lists and tuples are walked; other containers are left for Ray to pickle.
Importing this module does not import torch: tensors are recognised by type name first.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

INLINE_LIMIT = 100 * 1024
"""Items at or below this many array bytes ride inside the actor call (Ray's own inline limit)."""

_MAX_DEPTH = 8
"""Nesting depth walked by :func:`pack`; deeper structures are shipped as they are."""


@dataclass(frozen=True)
class TensorBox:
    """A CPU tensor travelling as its numpy view (zero-copy in the object store)."""

    array: np.ndarray
    torch_dtype: str  # e.g. "bfloat16": numpy has no bf16, so it travels as raw int16 bits


@dataclass(frozen=True)
class Packed:
    """An item ready to ship: its packed form and how many array bytes it carries."""

    value: Any
    nbytes: int
    has_tensors: bool

    @property
    def inline(self) -> bool:
        """True when the item is small enough to ride inside the actor call."""
        return self.nbytes <= INLINE_LIMIT


_BITCAST = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def _is_cpu_tensor(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor) and obj.device.type == "cpu"


def _box_tensor(tensor: Any) -> TensorBox:
    tensor = tensor.detach()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    dtype_name = str(tensor.dtype).removeprefix("torch.")
    if dtype_name in _BITCAST:
        import torch

        tensor = tensor.view(getattr(torch, _BITCAST[dtype_name]))
    return TensorBox(tensor.numpy(), dtype_name)


def _walk_pack(obj: Any, depth: int, acc: list[int]) -> Any:
    """Return ``obj`` with CPU tensors boxed; ``acc = [nbytes, n_tensors]`` is updated."""
    if isinstance(obj, np.ndarray):
        acc[0] += obj.nbytes
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        acc[0] += len(obj)
        return obj
    if _is_cpu_tensor(obj):
        box = _box_tensor(obj)
        acc[0] += box.array.nbytes
        acc[1] += 1
        return box
    if depth >= _MAX_DEPTH:
        return obj
    if isinstance(obj, dict):
        before = acc[1]
        out = {k: _walk_pack(v, depth + 1, acc) for k, v in obj.items()}
        return out if acc[1] > before else obj
    if isinstance(obj, (list, tuple)):
        before = acc[1]
        items = [_walk_pack(v, depth + 1, acc) for v in obj]
        if acc[1] == before:
            return obj
        return _rebuild(obj, items)
    return obj


def _rebuild(like: list | tuple, items: list) -> Any:
    """A container of the same kind as ``like`` holding ``items`` (namedtuples included)."""
    if isinstance(like, list):
        return items
    if hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def pack(item: Any) -> Packed:
    """Box CPU tensors inside ``item`` and measure its array bytes (containers are not copied
    unless they hold a tensor)."""
    acc = [0, 0]
    value = _walk_pack(item, 0, acc)
    return Packed(value=value, nbytes=acc[0], has_tensors=acc[1] > 0)


def _unbox(box: TensorBox) -> Any:
    import warnings

    import torch

    with warnings.catch_warnings():
        # Arrays from the object store are flagged read-only but each channel item has a single
        # consumer, so handing out the buffer itself is safe and saves a copy.
        warnings.simplefilter("ignore", UserWarning)
        tensor = torch.from_numpy(box.array)
    if box.torch_dtype in _BITCAST:
        tensor = tensor.view(getattr(torch, box.torch_dtype))
    return tensor


def _walk_unpack(obj: Any, depth: int) -> Any:
    if isinstance(obj, TensorBox):
        return _unbox(obj)
    if depth >= _MAX_DEPTH:
        return obj
    if isinstance(obj, dict):
        return {k: _walk_unpack(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return _rebuild(obj, [_walk_unpack(v, depth + 1) for v in obj])
    return obj


def unpack(value: Any, has_tensors: bool) -> Any:
    """Inverse of :func:`pack`; a no-op walk is skipped when the item held no tensor."""
    return _walk_unpack(value, 0) if has_tensors else value
