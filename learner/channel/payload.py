"""How items travel through Ray: small ones inline, large ones by object-store reference.

Why this module exists: Ray moves numpy arrays zero-copy (pickle-5 out-of-band buffers
straight into the shared-memory object store) but pickles ``torch.Tensor`` through a byte
string, which costs two extra copies of every tensor. :func:`pack` swaps CPU tensors for
their numpy view before Ray sees them and :func:`unpack` swaps them back with
``torch.from_numpy``, so a tensor is copied once (into the object store) and read in place.

It also decides *how* an item is shipped (:func:`seal`). An item with at most
:data:`INLINE_LIMIT` array bytes is pickled by the producer into one ``bytes`` blob that rides
inside the actor call: the actor then stores and returns opaque bytes, which Ray moves far more
cheaply than numpy arrays or dataclasses. Anything larger is ``ray.put`` by the producer and only
its reference travels (in a list, so Ray does not resolve it), so the actor never touches the
bytes; a coalescing handle puts the large items of one send as one object instead
(:mod:`learner.channel.bundle`). Items holding Ray object references or actor handles always
take the ``ray.put`` path, whose serializer tracks them.

Only dicts, lists and tuples are walked; other containers are left to pickle whole.
Importing this module does not import torch: tensors are recognised through ``sys.modules``.
"""

from __future__ import annotations

import pickle
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

from learner.channel.bundle import (
    BUNDLE_ITEM_LIMIT,
    BundleCache,
    Staged,
    put_bundle,
    stage,
    unbundle,
)
from learner.channel.errors import ChannelError

Envelope = tuple[Any, float]
"""What the channel actor queues: ``(pickled bytes | [ObjectRef, has_tensors] | [bundle ObjectRef,
has_tensors, index], weight)``; a producing handle also holds ``(Staged, weight)`` until its
send."""

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
    has_ray_refs: bool = False

    @property
    def inline(self) -> bool:
        """True when the item is small enough to ride inside the actor call."""
        return self.nbytes <= INLINE_LIMIT and not self.has_ray_refs


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
    """Return ``obj`` with CPU tensors boxed; ``acc = [nbytes, n_tensors, n_refs]`` is updated."""
    if isinstance(obj, (ray.ObjectRef, ray.actor.ActorHandle)):
        acc[2] += 1
        return obj
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
    acc = [0, 0, 0]
    value = _walk_pack(item, 0, acc)
    return Packed(value, nbytes=acc[0], has_tensors=acc[1] > 0, has_ray_refs=acc[2] > 0)


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


def _dumps(body: Any) -> bytes:
    try:
        return pickle.dumps(body, protocol=5)
    except (pickle.PicklingError, AttributeError, TypeError):  # lambdas, local classes...
        return ray.cloudpickle.dumps(body, protocol=5)


def seal(item: Any, weight: float, bundle: bool = False) -> Envelope:
    """Pack ``item`` for the channel; large items go to the object store here, in the producer,
    or, with ``bundle`` (a coalescing handle), are staged for one object per send
    (:mod:`learner.channel.bundle`)."""
    packed = pack(item)
    if packed.inline:
        return _dumps((packed.value, packed.has_tensors)), float(weight)
    if bundle and not packed.has_ray_refs and packed.nbytes <= BUNDLE_ITEM_LIMIT:
        staged = stage(packed.value, packed.nbytes, packed.has_tensors)
        if staged is not None:
            return staged, float(weight)
    # The value itself, not a tuple around it: Ray stores a top-level numpy array about twice
    # as fast as one nested in a container (measured at 16 MB on 2 cores).
    return [ray.put(packed.value), packed.has_tensors], float(weight)


def staged_bytes(envelope: Envelope) -> int:
    """Array bytes an envelope holds for a bundle (0 unless staged)."""
    return envelope[0].nbytes if isinstance(envelope[0], Staged) else 0


def bundle_batches(batches: list[tuple[Any, list[Envelope]]]) -> list[tuple[Any, list[Envelope]]]:
    """``batches`` with every staged item replaced by ``[bundle ref, has_tensors, index]`` into
    one new object holding them all (one ``ray.put`` per send)."""
    staged = [e[0] for _, envs in batches for e in envs if isinstance(e[0], Staged)]
    if not staged:
        return batches
    ref, index, out = put_bundle(staged), 0, []
    for key, envs in batches:
        sealed = []
        for payload, weight in envs:
            if isinstance(payload, Staged):
                payload, index = [ref, payload.has_tensors, index], index + 1
            sealed.append((payload, weight))
        out.append((key, sealed))
    return out


def refs_of(envelopes: list[Envelope], cache: BundleCache | None = None) -> list:
    """Distinct object references to fetch for ``envelopes`` (cached bundles left out), in order."""
    seen: dict = {}
    for payload, _ in envelopes:
        if isinstance(payload, list) and (cache is None or cache.get(payload[0]) is None):
            seen.setdefault(payload[0], None)
    return list(seen)


def open_envelopes(
    envelopes: list[Envelope], fetched: dict, cache: BundleCache | None = None
) -> list[Any]:
    """Items of ``envelopes``; ``fetched`` maps the references of :func:`refs_of` to values."""
    out = []
    for payload, _ in envelopes:
        if isinstance(payload, bytes):
            value, has_tensors = pickle.loads(payload)
        elif len(payload) == 3:  # an item of a bundle
            bundle = fetched.get(payload[0])
            if bundle is None and cache is not None:
                bundle = cache.get(payload[0])
            if cache is not None:
                cache.keep(payload[0], bundle)
            value, has_tensors = unbundle(bundle, payload[2]), payload[1]
        else:
            value, has_tensors = fetched[payload[0]], payload[1]
        out.append(unpack(value, has_tensors))
    return out


def _lost(name: str, err: Exception) -> ChannelError:
    return ChannelError(
        f"channel {name!r}: a large item was lost because the process that put it exited "
        f"before it was consumed ({type(err).__name__}); keep producers alive until their "
        "items are taken, or put smaller items"
    )


def open_all(name: str, envelopes: list[Envelope], cache: BundleCache | None = None) -> list[Any]:
    """Items of ``envelopes`` in order; all object-store fetches go out in one ``ray.get``."""
    refs = refs_of(envelopes, cache)
    try:
        return open_envelopes(envelopes, dict(zip(refs, ray.get(refs))) if refs else {}, cache)
    except ray.exceptions.ObjectLostError as err:
        raise _lost(name, err) from err


async def aopen_all(
    name: str, envelopes: list[Envelope], cache: BundleCache | None = None
) -> list[Any]:
    import asyncio

    refs = refs_of(envelopes, cache)
    try:
        fetched = dict(zip(refs, await asyncio.gather(*refs))) if refs else {}
        return open_envelopes(envelopes, fetched, cache)
    except ray.exceptions.ObjectLostError as err:
        raise _lost(name, err) from err
