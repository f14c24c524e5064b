"""Episode store: episodes appended step by step to a zarr v3 group, safe against kill -9.

On-disk layout (plain zarr v3, readable with ``zarr.open_group(path)``)::

    <root>/                      attrs {"rlinf_episodes": 1}
      episodes/000000/           attrs {"info": EpisodeInfo.to_dict(), "length": n}
        state [cap, D] float32   action, reward, terminated, truncated, intervention,
        images/<cam> [cap,H,W,3] policy_version, timestamp: one array per schema field
        final/state [1, D], final/images/<cam> [1, H, W, 3]   (only when a final obs was given)

Why this survives SIGKILL: every state change has one commit point, an atomic file replace or
directory rename (:mod:`rlinf_contracts.commit`). An episode is built complete (its ``zarr.json``
with ``info`` and ``length`` 0, and every array) in a staging directory ``<root>/.staging-N``
that is then renamed to ``episodes/N``: it appears whole or not at all. A step's rows are
written first (zarr replaces each chunk file atomically), then the group's ``zarr.json`` with
the new ``length`` -- the step's commit point. Rows at or past ``length`` are never read, so a
kill loses at most the step in flight. An episode's end (final observation, arrays trimmed to
``length``) commits when its ``zarr.json`` gets the closing status; a discard is a rename out of
``episodes/``. Reopening for writing (``mode="a"``) marks an episode found ``open`` as
``aborted`` and removes what a kill left half-made. One writer per store at a time.

Batches (``EpisodeWriter.append_steps``, what the ingest stores per turn of its drain): ``k``
steps of one episode go out as one resize and one write per field (rows ``length`` to
``length + k``), then one ``zarr.json`` with ``length + k`` -- the same single commit point as a
step, now for the whole batch. Before that write every row of the batch is at or past the
committed ``length``, so unreadable; after it, all are committed: a kill between the resize, the
field writes (each chunk file replaced atomically) and the commit leaves the episode at its
length before the batch, and ``mode="a"`` trims the uncommitted rows as for a step. Never a
part of a batch. A turn that spans an episode's end is one batch per episode, committed in seq
order with the end between them, so a kill leaves a seq prefix of whole batches (each episode's
own commit), which is all the ingest's ledger needs (it acks after the last commit).

Torn episodes: a store written by an older version can hold an episode directory without
``zarr.json`` or without ``info`` (its group was created, then killed before its attributes).
Every reader takes such an episode as empty with status ``aborted`` (``extra["torn"]`` says
why) and logs one warning per episode; ``mode="a"`` writes that ``info`` so later readers see a
clean store.

Cost: the field writes of a step go out concurrently through zarr's async API: about 6 ms per
state-only step (39-d) with the default ``fsync=False``, which survives kill -9 but not a power
cut. ``fsync=True`` (``IngestConfig.fsync``) flushes the step's chunk files, then its commit
point and their directories, before ``append`` returns: about 21 ms per state-only step and
31 ms with a 64x64 camera (3.5-4.3x), and ~80-100 ms per ``begin``, measured side by side on
a shared 2-core ext4 machine by ``benchmarks/store_durability.py``
(``benchmarks/results/store_durability.md``). A batch pays the commit and one write per field
once for all its steps: with full 16-step turns the fleet benchmark's ingest spends 1.8 ms of
CPU per stored state-only step, against 6.3-7.7 ms step by step
(``benchmarks/results/fleet_ingest.md``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import zarr
import zarr.storage

from rlinf_contracts.commit import crash_point, fsync_dir, fsync_files, write_atomic
from rlinf_contracts.episode import Episode, EpisodeError, EpisodeInfo, Step
from rlinf_data.store_repair import TORN, group_json, load, read_attrs, repair

log = logging.getLogger(__name__)
FORMAT_KEY = "rlinf_episodes"
TIME_CHUNK = 256  # rows per chunk of the small per-step arrays (images: one row per chunk)
__all__ = ["EpisodeStore", "EpisodeWriter", "FORMAT_KEY", "TORN"]


def _rows_async(
    arrays: dict[str, zarr.Array], index: slice | int, values: dict[str, np.ndarray]
) -> None:
    """Write ``values[k]`` into ``arrays[k][index]`` for every field, concurrently."""
    try:
        from zarr.core.sync import sync
    except ImportError:  # pragma: no cover - a zarr without the sync helper: one by one
        for k, a in arrays.items():
            a[index] = values[k]
        return

    async def put() -> None:
        await asyncio.gather(*(a._async_array.setitem(index, values[k]) for k, a in arrays.items()))

    sync(put())


class EpisodeWriter:
    """Appends the steps of one open episode; ``end`` closes it (use as a context manager:
    an exception inside the block marks the episode ``aborted``)."""

    def __init__(
        self, store: EpisodeStore, index: int, group: zarr.Group, info: EpisodeInfo
    ) -> None:
        self.store, self.index, self.group, self.info = store, index, group, info
        self.layout = info.layout
        self.length = 0
        self._capacity = 0
        self._last: Step | None = None
        self._dir = store.path / "episodes" / f"{index:06d}"
        # every field of the layout is an array of the episode group (pyright sees Array | Group)
        self._arrays = {name: cast(zarr.Array, group[name]) for name in self.layout.fields()}

    def _commit(self, length: int | None = None) -> None:
        """The one write that makes the episode's new state visible: its group ``zarr.json``
        (``length``: the committed steps it records, the writer's own by default)."""
        write_atomic(
            self._dir / "zarr.json",
            group_json(
                {"info": self.info.to_dict(), "length": self.length if length is None else length}
            ),
            self.store.fsync,
        )

    def _chunk_files(self, start: int, stop: int) -> list[Path]:
        """The chunk files of every field holding rows ``start`` to ``stop`` (what an fsync of
        those steps covers)."""
        out = []
        for name, a in self._arrays.items():
            rows = a.chunks[0]
            for c in range(start // rows, (stop - 1) // rows + 1):
                coords = tuple(c if d == 0 else 0 for d in range(a.ndim))
                out.append(self._dir / name / a.metadata.encode_chunk_key(coords))
        return out

    def append(self, step: Step) -> None:
        """Write one step; it is durable (survives kill -9, and a power cut with ``fsync``) when
        this returns."""
        self.append_steps([step])

    def append_steps(self, steps: Sequence[Step]) -> None:
        """Write ``steps`` as one batch: one resize and one write per field, one commit. When
        this returns all of them are durable; a kill before leaves none of them (the crash-safety
        argument is in the module docstring). A step that does not fit the layout raises before
        anything is written."""
        if self.info.status != "open":
            raise EpisodeError(
                f"episode {self.index} is {self.info.status}; begin a new one to append"
            )
        if not steps:
            return
        start, stop = self.length, self.length + len(steps)
        values = self._stack(steps)
        self._grow(stop)
        _rows_async(self._arrays, slice(start, stop), values)
        crash_point("append.rows_written")
        if self.store.fsync:
            fsync_files(self._chunk_files(start, stop))
        self._commit(stop)  # the commit point of the whole batch
        self.length = stop
        self._last = steps[-1]

    def _stack(self, steps: Sequence[Step]) -> dict[str, np.ndarray]:
        """The batch as one array per field (each step checked against the layout first)."""
        rows = [s.arrays() for s in steps]
        for values in rows:
            self.layout.check(values)
        return {k: np.stack([values[k] for values in rows]) for k in self._arrays}

    def _grow(self, rows: int) -> None:
        if rows <= self._capacity:
            return
        self._capacity = max(rows, self._capacity + TIME_CHUNK)
        for a in self._arrays.values():
            a.resize((self._capacity,) + a.shape[1:])
        crash_point("append.grown")
        if self.store.fsync:
            fsync_files(self._dir / name / "zarr.json" for name in self._arrays)

    def end(
        self,
        status: str | None = None,
        success: bool | None = None,
        final: dict[str, np.ndarray] | None = None,
    ) -> int:
        """Close the episode: ``status`` defaults to ``truncated`` when the last step was
        truncated, else ``complete``; ``final`` is the observation after the last step."""
        if status is None:
            status = "truncated" if self._last is not None and self._last.truncated else "complete"
        EpisodeInfo.from_dict(
            {**self.info.to_dict(), "status": status}
        )  # a valid status, before any write
        if final is not None:
            final = {k: np.asarray(v) for k, v in final.items()}
            self.layout.check(final, only_obs=True)
            for name, arr in final.items():
                self.group.create_array(f"final/{name}", data=arr[None])
                crash_point("end.final_array")
            if self.store.fsync:
                fsync_files(p for p in (self._dir / "final").rglob("*") if p.is_file())
        for a in self._arrays.values():  # store_repair.trim over the arrays already open
            if a.shape[0] != self.length:
                a.resize((self.length,) + a.shape[1:])
        crash_point("end.trimmed")
        if success is not None:
            self.info.success = bool(success)
        self.info.status = status
        self._commit()
        return self.index

    def abort(self) -> int:
        return self.end(status="aborted")

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if self.info.status == "open":
            self.end(status="aborted" if exc_type is not None else None)


def _committed(group: zarr.Group | None, name: str, n: int, dtype: Any, shape: tuple) -> np.ndarray:
    """The ``n`` committed rows of array ``name`` (none to read when ``n`` is 0: an episode
    torn before its arrays existed reads as empty)."""
    if not n or group is None:
        return np.zeros((0,) + tuple(shape), dtype=dtype)
    return np.asarray(cast(zarr.Array, group[name])[:n])


class EpisodeStore:
    """A directory of episodes. ``mode="a"`` creates or appends (and closes interrupted
    episodes as ``aborted``); ``mode="r"`` only reads. ``fsync``: every commit point is flushed
    to the disk (power-cut safe, slower; see the module docstring)."""

    def __init__(self, path: str | Path, mode: str = "a", fsync: bool = False) -> None:
        if mode not in ("a", "r"):
            raise ValueError(f"EpisodeStore mode={mode!r}; use 'a' (append) or 'r' (read)")
        self.path, self.mode, self.fsync = Path(path), mode, bool(fsync)
        self._warned: set[str] = set()
        if mode == "r" and not (self.path / "zarr.json").is_file():
            raise FileNotFoundError(f"no episode store at {self.path} (no zarr.json)")
        # a new store (or one killed while being created): its root and format key in one write
        if mode == "a":
            attrs = read_attrs(self.path)
            if (
                attrs is None
                or FORMAT_KEY not in attrs
                and not any(p.is_dir() for p in self.path.iterdir())
            ):
                self.path.mkdir(parents=True, exist_ok=True)
                write_atomic(
                    self.path / "zarr.json",
                    group_json({**(attrs or {}), FORMAT_KEY: 1}),
                    self.fsync,
                )
        self.root = zarr.open_group(str(self.path), mode=mode)
        # a root without the format key and without members was killed while being created: empty
        if FORMAT_KEY not in self.root.attrs and any(p.is_dir() for p in self.path.iterdir()):
            raise EpisodeError(
                f"{self.path} is not an episode store (no {FORMAT_KEY!r} attr); "
                "name an episode store directory (or a new one)"
            )
        if mode == "a":
            if not (self.path / "episodes" / "zarr.json").is_file():
                (self.path / "episodes").mkdir(exist_ok=True)
                write_atomic(self.path / "episodes" / "zarr.json", group_json({}), self.fsync)
            repair(self)

    # ---------------------------------------------------------------- reading
    def _names(self) -> list[str]:
        try:
            names = [n for n in os.listdir(self.path / "episodes") if n.isdigit()]
        except FileNotFoundError:  # a store killed while being created holds no episode yet
            return []
        return sorted(names, key=int)

    def __len__(self) -> int:
        return len(self._names())

    def _name(self, i: int) -> str:
        names = self._names()
        if not 0 <= i < len(names):
            raise IndexError(f"episode {i} not in store {self.path} ({len(names)} episodes)")
        return names[i]

    def _attrs(self, name: str) -> tuple[EpisodeInfo, int]:
        """Info and committed length of episode directory ``name``; a torn one is empty and
        aborted."""
        info, n, why = load(self.path / "episodes" / name)
        if why is not None:
            self._warn_torn(name, why)
        return info, n

    def _warn_torn(self, name: str, why: str) -> None:
        if name not in self._warned:  # once per episode, not once per access
            self._warned.add(name)
            log.warning(
                "episode %s of %s is torn (%s): read as an empty aborted episode%s",
                name,
                self.path,
                why,
                "; repairing it"
                if self.mode == "a"
                else "; opening the store with mode='a' repairs it",
            )

    def info(self, i: int) -> EpisodeInfo:
        return self._attrs(self._name(i))[0]

    def length(self, i: int) -> int:
        """Committed steps of episode ``i`` (rows past it may hold a half-written step)."""
        return self._attrs(self._name(i))[1]

    def read(self, i: int) -> Episode:
        name = self._name(i)
        info, n = self._attrs(name)
        g = zarr.open_group(self.root.store, path=f"episodes/{name}", mode="r") if n else None
        steps = {
            f: _committed(g, f, n, dtype, shape)
            for f, (dtype, shape) in info.layout.fields().items()
        }
        final = None
        if (
            g is not None
            and info.status != "open"
            and (self.path / "episodes" / name / "final").is_dir()
        ):
            try:  # a final observation is part of a committed end only when every field is there
                final = {
                    f: np.asarray(cast(zarr.Array, g[f"final/{f}"])[0])
                    for f in info.layout.observation_fields()
                }
            except (KeyError, FileNotFoundError):
                final = None
        return Episode(info, steps, final)

    def __iter__(self) -> Iterator[Episode]:
        for i in range(len(self)):
            yield self.read(i)

    # ---------------------------------------------------------------- writing
    def begin(self, info: EpisodeInfo, capacity: int = 0) -> EpisodeWriter:
        """Open a new episode (its index is ``writer.index``). It is staged whole (attributes
        and every array) and renamed into ``episodes/``: a kill leaves it complete or absent.
        ``capacity``: rows to make room for now, when the episode's length is known (a whole
        episode's write): its arrays are then one chunk each, neither grown nor trimmed --
        zarr's resize of an image array visits every chunk (one per frame) it drops, and those
        two resizes and a file per frame made most of a short episode's write (3.5x)."""
        if self.mode != "a":
            raise EpisodeError(f"episode store {self.path} is open read-only")
        info.status = "open"
        names = self._names()
        index = int(names[-1]) + 1 if names else 0
        name = f"{index:06d}"
        stage = self.path / f".staging-{name}"
        shutil.rmtree(stage, ignore_errors=True)
        g = zarr.open_group(
            zarr.storage.LocalStore(stage),
            mode="w",
            attributes={"info": info.to_dict(), "length": 0},
        )
        crash_point("begin.group_staged")
        for f, (dtype, shape) in info.layout.fields().items():
            # appended step by step: a frame per image chunk (a step rewrites no other frame);
            # written whole: the episode is one chunk per field
            chunk = (capacity,) if capacity else (1,) if f.startswith("images/") else (TIME_CHUNK,)
            g.create_array(
                f, shape=(capacity,) + shape, chunks=chunk + shape, dtype=dtype, fill_value=0
            )
            crash_point("begin.array_staged")
        if self.fsync:
            fsync_files(p for p in stage.rglob("*") if p.is_file())
        os.rename(stage, self.path / "episodes" / name)  # the commit point of the new episode
        if self.fsync:
            fsync_dir(self.path / "episodes")
        crash_point("begin.renamed")
        group = zarr.open_group(self.root.store, path=f"episodes/{name}", mode="r+")
        writer = EpisodeWriter(self, index, group, info)
        writer._capacity = capacity
        return writer

    def write(self, episode: Episode) -> int:
        """Append a whole in-memory episode (imports, tests); returns its index."""
        episode.validate()
        status = episode.info.status if episode.info.status != "open" else None
        info = EpisodeInfo.from_dict(episode.info.to_dict())
        with self.begin(info, capacity=len(episode.steps["action"])) as w:
            _rows_bulk(w, episode.steps)
            return w.end(status=status, final=episode.final)

    def discard(self, index: int) -> None:
        """Delete episode ``index`` (e.g. a failed demo with ``--only-success``): one rename out
        of ``episodes/`` (the commit point), then the files go."""
        if self.mode != "a":
            raise EpisodeError(f"episode store {self.path} is open read-only")
        trash = self.path / f".trash-{index:06d}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(self.path / "episodes" / f"{index:06d}", trash)
        except FileNotFoundError:
            raise IndexError(f"no episode {index:06d} in store {self.path} to discard") from None
        if self.fsync:
            fsync_dir(self.path / "episodes")
        crash_point("discard.moved")
        shutil.rmtree(trash, ignore_errors=True)


def _rows_bulk(w: EpisodeWriter, steps: dict[str, np.ndarray]) -> None:
    n = len(steps["action"])
    w._grow(n)
    if n:
        _rows_async(w._arrays, slice(0, n), steps)
        if w.store.fsync:
            fsync_files(p for p in w._dir.rglob("*") if p.is_file())
    w.length = n
    w._commit()
    if n:
        w._last = Step(
            state=steps["state"][-1],
            action=steps["action"][-1],
            truncated=bool(steps["truncated"][-1]),
        )
