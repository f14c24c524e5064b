"""Episode store: episodes appended step by step to a zarr v3 group, safe against kill -9.

On-disk layout (plain zarr v3, readable with ``zarr.open_group(path)``)::

    <root>/                      attrs {"rlinf_episodes": 1}
      episodes/000000/           attrs {"info": EpisodeInfo.to_dict(), "length": n}
        state [cap, D] float32   action, reward, terminated, truncated, intervention,
        images/<cam> [cap,H,W,3] policy_version, timestamp: one array per schema field
        final/state [1, D], final/images/<cam> [1, H, W, 3]   (only when a final obs was given)

Why this survives SIGKILL: a step's rows are written first (each chunk file is replaced
atomically by zarr's local store), and only then the group attribute ``length`` (one atomic
rewrite of the group's ``zarr.json``). Rows at or past ``length`` are never read, so a kill loses
at most the step in flight. Arrays grow by whole chunks (``cap`` >= ``length``) and are trimmed
to ``length`` when the episode ends; an episode found ``open`` when the store is reopened for
writing was interrupted: it is trimmed and marked ``aborted``. One writer per store at a time.

Cost: the field writes of a step go out concurrently through zarr's async API, about 3 ms per
state-only step on a shared 2-core machine (``tests/rlinf_data/test_store.py`` prints it).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import zarr

from rlinf_contracts.episode import Episode, EpisodeError, EpisodeInfo, Step, StepLayout

log = logging.getLogger(__name__)
FORMAT_KEY = "rlinf_episodes"
TIME_CHUNK = 256  # rows per chunk of the small per-step arrays (images: one row per chunk)


def _rows_async(arrays: dict[str, zarr.Array], index: slice | int, values: dict[str, np.ndarray]) -> None:
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

    def __init__(self, store: "EpisodeStore", index: int, group: zarr.Group, info: EpisodeInfo) -> None:
        self.store, self.index, self.group, self.info = store, index, group, info
        self.layout = info.layout
        self.length = 0
        self._capacity = 0
        self._last: Step | None = None
        self._arrays: dict[str, zarr.Array] = {}
        for name, (dtype, shape) in self.layout.fields().items():
            chunk = (1,) if name.startswith("images/") else (TIME_CHUNK,)
            self._arrays[name] = group.create_array(name, shape=(0,) + shape, chunks=chunk + shape,
                                                    dtype=dtype, fill_value=0)

    def append(self, step: Step) -> None:
        """Write one step; it is durable (survives kill -9) when this returns."""
        if self.info.status != "open":
            raise EpisodeError(f"episode {self.index} is {self.info.status}; begin a new one to append")
        values = step.arrays()
        self.layout.check(values)
        if self.length >= self._capacity:
            self._capacity += TIME_CHUNK
            for a in self._arrays.values():
                a.resize((self._capacity,) + a.shape[1:])
        _rows_async(self._arrays, self.length, values)
        self.length += 1
        self.group.attrs["length"] = self.length  # the commit point of this step
        self._last = step

    def end(self, status: str | None = None, success: bool | None = None,
            final: dict[str, np.ndarray] | None = None) -> int:
        """Close the episode: ``status`` defaults to ``truncated`` when the last step was
        truncated, else ``complete``; ``final`` is the observation after the last step."""
        if status is None:
            status = "truncated" if self._last is not None and self._last.truncated else "complete"
        if final is not None:
            final = {k: np.asarray(v) for k, v in final.items()}
            self.layout.check(final, only_obs=True)
            for name, arr in final.items():
                self.group.create_array(f"final/{name}", data=arr[None])
        if success is not None:
            self.info.success = bool(success)
        self.info.status = status
        _trim(self.group, self.length)
        self.group.attrs.update({"info": self.info.to_dict(), "length": self.length})
        EpisodeInfo.from_dict(self.group.attrs["info"])  # the status was valid
        return self.index

    def abort(self) -> int:
        return self.end(status="aborted")

    def __enter__(self) -> "EpisodeWriter":
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if self.info.status == "open":
            self.end(status="aborted" if exc_type is not None else None)


def _committed(group: zarr.Group, name: str, n: int, dtype: Any, shape: tuple) -> np.ndarray:
    """The ``n`` committed rows of array ``name``. A writer killed after creating the episode's
    group but before all its arrays existed committed no step: a missing array reads as empty."""
    try:
        return np.asarray(group[name][:n])
    except (KeyError, FileNotFoundError):
        if n:
            raise
        return np.zeros((0,) + tuple(shape), dtype=dtype)


def _trim(group: zarr.Group, length: int) -> None:
    """Shrink every per-step array of an episode group to its committed length."""
    for name, arr in group.arrays():
        arr.resize((length,) + arr.shape[1:])
    if "images" in group:
        for name, arr in group["images"].arrays():
            arr.resize((length,) + arr.shape[1:])


class EpisodeStore:
    """A directory of episodes. ``mode="a"`` creates or appends (and closes interrupted
    episodes as ``aborted``); ``mode="r"`` only reads."""

    def __init__(self, path: str | Path, mode: str = "a") -> None:
        if mode not in ("a", "r"):
            raise ValueError(f"EpisodeStore mode={mode!r}; use 'a' (append) or 'r' (read)")
        self.path = Path(path)
        if mode == "r" and not (self.path / "zarr.json").is_file():
            raise FileNotFoundError(f"no episode store at {self.path} (no zarr.json)")
        self.mode = mode
        self.root = zarr.open_group(str(self.path), mode=mode)
        if mode == "a" and FORMAT_KEY not in self.root.attrs:
            if len(list(self.root.keys())):
                raise EpisodeError(f"{self.path} is a zarr group but not an episode store (no {FORMAT_KEY!r} attr)")
            self.root.attrs[FORMAT_KEY] = 1
            self.root.create_group("episodes")
        elif FORMAT_KEY not in self.root.attrs:
            raise EpisodeError(f"{self.path} is not an episode store (no {FORMAT_KEY!r} attr)")
        if mode == "a":
            self._close_interrupted()

    # ---------------------------------------------------------------- reading
    def _names(self) -> list[str]:
        return sorted(self.root["episodes"].group_keys())

    def __len__(self) -> int:
        return len(self._names())

    def _group(self, i: int) -> zarr.Group:
        names = self._names()
        if not 0 <= i < len(names):
            raise IndexError(f"episode {i} not in store {self.path} ({len(names)} episodes)")
        return self.root["episodes"][names[i]]

    def info(self, i: int) -> EpisodeInfo:
        return EpisodeInfo.from_dict(self._group(i).attrs["info"])

    def length(self, i: int) -> int:
        """Committed steps of episode ``i`` (rows past it may hold a half-written step)."""
        return int(self._group(i).attrs.get("length", 0))

    def read(self, i: int) -> Episode:
        g = self._group(i)
        info, n = EpisodeInfo.from_dict(g.attrs["info"]), int(g.attrs.get("length", 0))
        steps = {name: _committed(g, name, n, dtype, shape) for name, (dtype, shape) in info.layout.fields().items()}
        final = None
        if "final" in g:
            final = {name: np.asarray(g[f"final/{name}"][0]) for name in info.layout.observation_fields()}
        return Episode(info, steps, final)

    def __iter__(self) -> Iterator[Episode]:
        for i in range(len(self)):
            yield self.read(i)

    # ---------------------------------------------------------------- writing
    def begin(self, info: EpisodeInfo) -> EpisodeWriter:
        """Open a new episode (its index is ``writer.index``)."""
        if self.mode != "a":
            raise EpisodeError(f"episode store {self.path} is open read-only")
        info.status = "open"
        names = self._names()
        index = int(names[-1]) + 1 if names else 0
        group = self.root["episodes"].create_group(f"{index:06d}")
        group.attrs.update({"info": info.to_dict(), "length": 0})
        return EpisodeWriter(self, index, group, info)

    def write(self, episode: Episode) -> int:
        """Append a whole in-memory episode (imports, tests); returns its index."""
        episode.validate()
        status = episode.info.status if episode.info.status != "open" else None
        with self.begin(EpisodeInfo.from_dict(episode.info.to_dict())) as w:
            _rows_bulk(w, episode.steps)
            return w.end(status=status, final=episode.final)

    def discard(self, index: int) -> None:
        """Delete episode ``index`` (e.g. a failed demo with ``--only-success``)."""
        del self.root["episodes"][f"{index:06d}"]

    def _close_interrupted(self) -> None:
        for name in self._names():
            g = self.root["episodes"][name]
            info = g.attrs.get("info", {})
            if info.get("status") == "open":
                n = int(g.attrs.get("length", 0))
                log.warning("episode %s in %s was interrupted after %d steps: marked aborted", name, self.path, n)
                _trim(g, n)
                g.attrs["info"] = {**info, "status": "aborted"}


def _rows_bulk(w: EpisodeWriter, steps: dict[str, np.ndarray]) -> None:
    n = len(steps["action"])
    w._capacity = n
    for a in w._arrays.values():
        a.resize((n,) + a.shape[1:])
    _rows_async(w._arrays, slice(0, n), steps)
    w.length = n
    w.group.attrs["length"] = n
    if n:
        w._last = Step(state=steps["state"][-1], action=steps["action"][-1],
                       truncated=bool(steps["truncated"][-1]))

