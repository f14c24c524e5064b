"""A bounded, append-only on-disk spool of numbered frames (the streamer's outbox).

Why not the episode store: the streamer needs the exact wire frames in sequence order, cheap
deletion of the acknowledged prefix and a crash-safe sequence counter; a zarr episode store
has none of these (and the recorder may write one beside it). Layout: ``<dir>/<seq0>.seg``
segment files, each a run of records ``[seq u64][length u32][crc32 u32][payload]``. A record is
written and flushed before :meth:`Spool.append` returns, so a process killed with SIGKILL keeps
it (the OS holds the page; ``fsync=True`` also survives a power cut, at ~ms per record). On
open, a torn last record (a kill mid-write) is cut off. Segments whose frames are all
acknowledged are deleted; the newest segment always stays, so its name or its last record
says where numbering continues (a renumbering, :meth:`Spool.skip_to`, creates its new segment
before deleting the old ones for that reason). A segment holds at most a quarter of
``max_bytes``, so acknowledged frames always free room. A full spool refuses frames (``append``
returns None: back-pressure) until acknowledgements delete segments; a frame larger than
``max_bytes`` can never fit and raises.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> s = Spool(d, max_bytes=1 << 20)
>>> [s.append(b"frame%d" % i) for i in range(3)]
[0, 1, 2]
>>> [seq for seq, _ in s.read(after=0, max_items=10)]
[1, 2]
>>> s.ack(1); Spool(d, max_bytes=1 << 20).next_seq
3
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlinf_contracts.commit import crash_point, fsync_dir

log = logging.getLogger(__name__)
HEADER = struct.Struct("<QII")  # seq, payload length, crc32 of the payload


@dataclass
class _Segment:
    seq0: int
    path: Path
    size: int = 0
    last_seq: int = -1  # -1: empty


class Spool:
    """Frames numbered from 0 without gaps; ``append`` refuses (returns None) when full and
    raises ValueError for a frame bigger than ``max_bytes``."""

    def __init__(
        self,
        directory: str | Path,
        max_bytes: int,
        segment_bytes: int = 4 << 20,
        fsync: bool = False,
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        # a segment is deleted only once all its frames are acknowledged: at most a quarter of the
        # bound each, so acknowledged frames free room even when max_bytes < segment_bytes
        self.max_bytes, self.fsync = int(max_bytes), fsync
        self.segment_bytes = max(1, min(int(segment_bytes), self.max_bytes // 4))
        self._lock = threading.Lock()
        self._segments: list[_Segment] = [self._recover(p) for p in sorted(self.dir.glob("*.seg"))]
        if self._segments:
            tail = self._segments[-1]
            self.next_seq = tail.last_seq + 1 if tail.last_seq >= 0 else tail.seq0
        else:
            self.next_seq = 0
            self._segments.append(self._new_segment(0))
        self._file = open(self._segments[-1].path, "ab")
        self._cursor: tuple[int, int, int] | None = (
            None  # (segment seq0, byte offset, next seq there)
        )

    # ---- recovery ------------------------------------------------------------------------------
    def _recover(self, path: Path) -> _Segment:
        seg = _Segment(int(path.stem), path)
        data = path.read_bytes()
        off = 0
        while off + HEADER.size <= len(data):
            seq, n, crc = HEADER.unpack_from(data, off)
            end = off + HEADER.size + n
            if end > len(data) or zlib.crc32(data[off + HEADER.size : end]) != crc:
                break
            seg.last_seq, off = seq, end
        if off != len(data):
            log.warning(
                "spool %s: cut a torn record at byte %d of %d (killed mid-write)",
                path,
                off,
                len(data),
            )
            with open(path, "r+b") as f:
                f.truncate(off)
                if self.fsync:
                    os.fsync(f.fileno())
        seg.size = off
        return seg

    def _new_segment(self, seq0: int) -> _Segment:
        path = self.dir / f"{seq0:016d}.seg"
        path.touch()
        if self.fsync:
            fsync_dir(self.dir)
        crash_point("spool.segment_created")
        return _Segment(seq0, path)

    # ---- writing ---------------------------------------------------------------------------------
    @property
    def bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def append(self, payload: bytes | Callable[[int], bytes]) -> int | None:
        """Write one frame; returns its seq, or None when the spool is at ``max_bytes``.
        ``payload`` may be a function of the seq (a frame that carries its own number)."""
        with self._lock:
            if callable(payload):
                payload = payload(self.next_seq)
            record = HEADER.size + len(payload)
            if record > self.max_bytes:
                raise ValueError(
                    f"spool {self.dir}: a {record}-byte frame can never fit its max_bytes="
                    f"{self.max_bytes}; raise the spool bound (streamer.spool_max_mb)"
                )
            if self.bytes + record > self.max_bytes:
                return None  # back-pressure: room comes back as the learner acknowledges frames
            tail = self._segments[-1]
            if tail.size and tail.size + record > self.segment_bytes:
                self._file.close()
                tail = self._new_segment(self.next_seq)
                self._segments.append(tail)
                self._file = open(tail.path, "ab")
            seq = self.next_seq
            self._file.write(HEADER.pack(seq, len(payload), zlib.crc32(payload)) + payload)
            self._file.flush()
            if self.fsync:
                os.fsync(self._file.fileno())
            crash_point("spool.record_written")
            tail.size += record
            tail.last_seq = seq
            self.next_seq += 1
            return seq

    def skip_to(self, seq: int) -> None:
        """Continue numbering at ``seq`` (only while empty: the learner already holds lower seqs
        from an earlier spool that was deleted)."""
        with self._lock:
            if self.pending_count() or seq <= self.next_seq:
                return
            log.warning(
                "spool %s: the learner already holds seqs below %d; numbering continues there",
                self.dir,
                seq,
            )
            self._file.close()
            new = self._new_segment(seq)  # first: a kill from here on reopens numbering at seq
            for s in self._segments:
                s.path.unlink(missing_ok=True)
                crash_point("spool.old_segment_removed")
            self._segments = [new]
            self._file = open(new.path, "ab")
            self.next_seq, self._cursor = seq, None

    def pending_count(self) -> int:
        """Frames on disk (acknowledged ones in a partly acknowledged segment included)."""
        return sum(s.last_seq - s.seq0 + 1 for s in self._segments if s.last_seq >= 0)

    # ---- reading ---------------------------------------------------------------------------------
    def read(
        self, after: int, max_items: int, max_bytes: int = 32 << 20
    ) -> list[tuple[int, bytes]]:
        """Up to ``max_items`` frames with seq > ``after``, in order (fewer when none are written
        yet)."""
        out: list[tuple[int, bytes]] = []
        size = 0
        with self._lock:
            want = after + 1
            for seg in self._segments:
                if seg.last_seq < want or len(out) >= max_items:
                    continue
                off = 0
                if (
                    self._cursor is not None
                    and self._cursor[0] == seg.seq0
                    and self._cursor[2] <= want
                ):
                    off = self._cursor[1]
                with open(seg.path, "rb") as f:
                    f.seek(off)
                    while off < seg.size and len(out) < max_items and size < max_bytes:
                        seq, n, _ = HEADER.unpack(f.read(HEADER.size))
                        if seq >= want:
                            out.append((seq, f.read(n)))
                            size += n
                            want = seq + 1
                        else:
                            f.seek(n, os.SEEK_CUR)
                        off += HEADER.size + n
                self._cursor = (seg.seq0, off, want)
        return out

    def ack(self, seq: int) -> None:
        """Every frame <= ``seq`` is durable elsewhere: delete the segments holding only those."""
        with self._lock:
            tail = self._segments[-1]
            if tail.last_seq >= 0 and tail.last_seq <= seq and tail.size > self.segment_bytes // 2:
                self._file.close()  # a big, fully acknowledged tail: start a new one so it can go
                self._segments.append(self._new_segment(self.next_seq))
                self._file = open(self._segments[-1].path, "ab")
            keep = [
                s
                for s in self._segments[:-1]
                if s.last_seq > seq or s.last_seq < 0 and s.seq0 > seq
            ]
            for s in self._segments[:-1]:  # oldest first: a kill leaves a suffix of the frames
                if s not in keep:
                    s.path.unlink(missing_ok=True)
                    crash_point("spool.old_segment_removed")
            self._segments = keep + [self._segments[-1]]

    def close(self) -> None:
        with self._lock:
            self._file.close()
