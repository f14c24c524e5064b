"""Commit points of durable files: one atomic file replace (or directory rename) per state change.

Why a module of its own, in the bottom room: every durable change of the episode store (an
episode created, a step's ``length``, an episode's end, a discard) and of the robot PC's
transition spool (a segment created, an old one removed) must become visible in exactly one
atomic step, so a process killed at any instant leaves either the old state or the new one; the
spool runs where zarr is not installed, so the helpers cannot live beside the store. The helpers
here are that step: :func:`write_atomic` writes a temporary file beside the target and
``os.replace``-s it; with ``fsync=True`` the temporary file is flushed to the disk before the
replace and the directory after it, so the commit also survives a power cut.

:data:`TEST_CRASH_HOOK` is a test hook, never set in production: the kill-loop tests set it in a
forked writer to SIGKILL the process at a named internal point (between two writes of one
operation), in the store and the spool alike. Unset, each :func:`crash_point` costs one global
lookup.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

TMP_SUFFIX = (
    ".rlinf-tmp"  # temporary files of write_atomic; a kill can leave one, reopening removes it
)
# Test hook: a function of the crash point's name (see tests/rlinf_data/test_store_killloop.py).
TEST_CRASH_HOOK: Callable[[str], None] | None = None


def crash_point(name: str) -> None:
    """Where a test may kill the process (a no-op unless :data:`TEST_CRASH_HOOK` is set)."""
    if TEST_CRASH_HOOK is not None:
        TEST_CRASH_HOOK(name)


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename or a new file in it) to the disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_files(files: Iterable[Path]) -> None:
    """Flush ``files`` and the directories holding them (each directory once). A missing file
    is one zarr did not write or removed (a chunk equal to the fill value): only its directory."""
    dirs: set[Path] = set()
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except FileNotFoundError:
            fd = -1
        if fd >= 0:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        dirs.add(f.parent)
    for d in sorted(dirs):
        try:
            fsync_dir(d)
        except FileNotFoundError:
            pass


def write_atomic(path: Path, data: bytes, fsync: bool = False) -> None:
    """Replace ``path`` by ``data`` in one step: readers see the old file or the new one, never
    a part. ``fsync``: the new content and the rename are on the disk when this returns."""
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
    with open(tmp, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    crash_point("commit.tmp_written")
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)
