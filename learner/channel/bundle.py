"""Bundles: the large items of one coalesced send travel as one object-store object.

Why: a ``ray.put`` per item costs Ray's fixed per-object work (create + seal in the object
store, one reference to track, borrowed by the channel actor and handed back to the consumer)
on top of the copy. At 1 MB that fixed part is most of the time: per-item references ran the
1 MB stream at ~0.6x raw ``ray.put``/``ray.get``. An unbounded channel handle already holds its
puts back to send them in one actor call (:mod:`learner.channel.buffers`), so their large items
can go into the object store as *one* object as well: one ``ray.put`` and one reference per send.

Copy semantics: ``put`` must snapshot the item (the caller may reuse its array right after), and
the bundle is only written at send time, so :func:`stage` copies the item's array buffers at put
time (pickle protocol 5 out-of-band buffers, copied once; everything else is pickled into a small
header). The object store write at send is the second copy; a consumer reads zero-copy views of
the bundle, as it reads a raw ``ray.get``. A memcpy of 1 MB is ~0.1 ms, well under the per-object
cost it saves. Items above :data:`BUNDLE_ITEM_LIMIT` skip staging (the extra copy would cost
more than one object's overhead) and keep their own ``ray.put``, as do items that hold Ray
references (Ray's serializer must see those) and every put of a bounded channel (each put is
acknowledged on its own there, so there is nothing to bundle).

Memory: an item read from a bundle is a view of the bundle, so the bundle's object stays in the
store until every item taken from it is released (bounded by :data:`BUNDLE_BYTES`). A consumer
handle caches the last bundle it fetched (:class:`BundleCache`), so the items of one bundle cost
one ``ray.get`` between them.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

BUNDLE_ITEM_LIMIT = 4 << 20
"""Items with more array bytes than this get their own ``ray.put`` instead of a bundle."""
BUNDLE_BYTES = 16 << 20
"""A handle sends its coalesced puts once this many bytes are staged for a bundle."""


@dataclass(frozen=True)
class Staged:
    """A large item held by the producing handle until its send: a pickle header and private
    copies of the item's array buffers."""

    header: bytes
    buffers: list[np.ndarray]
    nbytes: int
    has_tensors: bool


def stage(value: Any, nbytes: int, has_tensors: bool) -> Staged | None:
    """Snapshot a packed value for a later bundle; None when it cannot be staged (a buffer that
    is not contiguous, or a value pickle cannot take): the caller ``ray.put``s it instead."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        header = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
        copies = [np.frombuffer(buf.raw(), np.uint8).copy() for buf in buffers]
    except (pickle.PicklingError, AttributeError, TypeError, BufferError, ValueError):
        return None
    return Staged(header, copies, nbytes, has_tensors)


def put_bundle(staged: list[Staged]) -> Any:
    """One object holding every staged item (headers in-band, buffers out-of-band)."""
    return ray.put([(s.header, s.buffers) for s in staged])


def unbundle(bundle: list, index: int) -> Any:
    """Item ``index`` of a fetched bundle; its arrays are views of the bundle's buffers."""
    header, buffers = bundle[index]
    return pickle.loads(header, buffers=buffers)


class BundleCache:
    """The last bundle a consumer handle fetched, so its items need one ``ray.get`` in all.

    Only the most recent bundle is kept: a producer's sends reach a key in order, so a consumer
    finishes one bundle's items before the next bundle's (keys interleaved by one producer may
    fetch a bundle twice, which costs time, never correctness).
    """

    def __init__(self) -> None:
        self._entry: tuple[Any, Any] | None = None  # one tuple: swapped atomically across threads

    def get(self, ref: Any) -> Any:
        entry = self._entry
        return entry[1] if entry is not None and entry[0] == ref else None

    def keep(self, ref: Any, value: Any) -> None:
        self._entry = (ref, value)

    def clear(self) -> None:
        self._entry = None
