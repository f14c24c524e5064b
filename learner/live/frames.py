"""The newest camera frame of every robot and camera, kept as the array, encoded as PNG on demand.

Why lazily: transitions arrive at the robots' control rate (tens per second per robot) and the
page is looked at rarely, so :meth:`FrameTap.offer` only keeps a reference to the newest image
(the ingest never mutates it) and a PNG is encoded when the page or a snapshot asks, once per
new frame. PNG with the standard library's ``zlib`` (no imaging dependency in the learner):
lossless, and a camera frame of the learner's size (tens to a few hundred pixels a side) is small.

>>> import numpy as np
>>> tap = FrameTap()
>>> tap.offer("r0", {"wrist": np.zeros((2, 3, 3), np.uint8)}, seq=5)
>>> [(f.robot_id, f.camera, f.height, f.width, f.seq) for f in tap.views()]
[('r0', 'wrist', 2, 3, 5)]
>>> tap.png("r0", "wrist")[:8] == PNG_SIGNATURE, tap.png("r0", "nope")
(True, None)
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from learner.live.snapshot import FrameView

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPE = {1: 0, 3: 2, 4: 6}  # channels -> PNG colour type (grey, RGB, RGBA)


def encode_png(image: np.ndarray) -> bytes:
    """A PNG of an ``HxW`` / ``HxWxC`` (C: 1, 3, 4) image; floats in [0, 1] are scaled to 8 bit."""
    a = np.asarray(image)
    if a.dtype != np.uint8:
        scale = 255.0 if a.dtype.kind == "f" and float(np.nanmax(a, initial=0.0)) <= 1.0 else 1.0
        a = np.clip(np.nan_to_num(a.astype(np.float64)) * scale, 0, 255).astype(np.uint8)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in _COLOR_TYPE:
        raise ValueError(f"a camera frame is HxW or HxWx(1|3|4), got shape {a.shape}")
    h, w, c = a.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), a.reshape(h, w * c)], axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", w, h, 8, _COLOR_TYPE[c], 0, 0, 0)
    return (
        PNG_SIGNATURE
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


class FrameTap:
    """Thread-safe: the learner offers frames, the view's threads read them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frames: dict[tuple[str, str], tuple[int, Any]] = {}  # (robot, cam) -> (seq, image)
        self._png: dict[tuple[str, str], tuple[int, bytes]] = {}

    def offer(self, robot_id: str, images: Mapping[str, Any], seq: int) -> None:
        with self._lock:
            for cam, image in images.items():
                self._frames[(robot_id, cam)] = (seq, image)

    def views(self) -> list[FrameView]:
        with self._lock:
            items = list(self._frames.items())
        return [
            FrameView(r, c, int(np.shape(img)[0]), int(np.shape(img)[1]), seq)
            for (r, c), (seq, img) in items
        ]

    def png(self, robot_id: str, camera: str) -> bytes | None:
        """The newest frame as PNG (encoded once per frame), None when the robot has no such
        camera."""
        key = (robot_id, camera)
        with self._lock:
            frame = self._frames.get(key)
            cached = self._png.get(key)
        if frame is None:
            return None
        if cached is not None and cached[0] == frame[0]:
            return cached[1]
        data = encode_png(frame[1])
        with self._lock:
            self._png[key] = (frame[0], data)
        return data
