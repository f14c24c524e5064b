"""What a kill can leave in an episode store, read tolerantly and repaired on reopening.

Why apart from :mod:`rlinf_data.store`: the writer's commit protocol keeps the store clean, but
a store written by an older version (which created an episode's group and then wrote its
``info`` in a second write), a power cut without ``fsync``, or a kill between the writes of an
operation leave states a reader must survive: an episode directory without ``zarr.json`` or
without ``info`` ("torn"), an episode still ``open``, temporary files, a staged episode never
renamed into place, a discarded one not yet deleted. Readers take a torn episode as empty and
``aborted``; :func:`repair` (run when the store is opened for writing) rewrites it that way.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import zarr

from rlinf_contracts.commit import TMP_SUFFIX, write_atomic
from rlinf_contracts.episode import EpisodeError, EpisodeInfo, StepLayout

if TYPE_CHECKING:
    from rlinf_data.store import EpisodeStore

log = logging.getLogger(__name__)
TORN = (
    "torn"  # key of info.extra on an episode read (or repaired) from a torn group: why it was torn
)
ZARR_TMP_SUFFIX = ".partial"  # zarr's local store writes <name>.<hex>.partial, then renames it


def group_json(attributes: dict[str, Any]) -> bytes:
    """A zarr v3 group's ``zarr.json`` carrying ``attributes``, as zarr itself writes it."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.group import GroupMetadata

    return (
        GroupMetadata(attributes=attributes)
        .to_buffer_dict(default_buffer_prototype())["zarr.json"]
        .to_bytes()
    )


def read_attrs(episode_dir: Path) -> dict[str, Any] | None:
    """The group attributes in ``episode_dir/zarr.json``; None when missing or unreadable."""
    try:
        attrs = json.loads((episode_dir / "zarr.json").read_bytes()).get("attributes", {})
    except (OSError, ValueError, AttributeError):
        return None
    return attrs if isinstance(attrs, dict) else None


def load(episode_dir: Path) -> tuple[EpisodeInfo, int, str | None]:
    """``(info, committed length, why it is torn or None)`` of one episode directory."""
    attrs = read_attrs(episode_dir)
    try:
        if attrs is None:
            raise EpisodeError("its zarr.json is missing or unreadable")
        if "info" not in attrs:
            raise EpisodeError("its group has no 'info' attribute")
        return EpisodeInfo.from_dict(attrs["info"]), int(attrs.get("length", 0)), None
    except (EpisodeError, TypeError, ValueError, KeyError, AttributeError) as e:
        why = str(e) if isinstance(e, EpisodeError) else f"malformed info: {type(e).__name__}: {e}"
        return torn_info(episode_dir, why), 0, why


def _shape(array_dir: Path) -> list[int] | None:
    try:
        meta = json.loads((array_dir / "zarr.json").read_bytes())
        return [int(v) for v in meta["shape"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def torn_info(episode_dir: Path, why: str) -> EpisodeInfo:
    """The info a torn episode reads with: empty, ``aborted``, its layout taken from the arrays
    it has (``0 x 0`` when the state or action array is missing)."""
    state, action = _shape(episode_dir / "state"), _shape(episode_dir / "action")
    layout = StepLayout(0, 0)
    if state and action and len(state) == 2 and len(action) == 2:
        cams = {}
        for cam in sorted(p.name for p in (episode_dir / "images").glob("*") if p.is_dir()):
            shape = _shape(episode_dir / "images" / cam)
            if shape is None or len(shape) != 4:
                break
            cams[cam] = (shape[1], shape[2])
        else:
            layout = StepLayout(state[1], action[1], cams)
    return EpisodeInfo(task="unknown", layout=layout, status="aborted", extra={TORN: why})


def trim(group: zarr.Group, layout: StepLayout, length: int) -> None:
    """Shrink every per-step array of an episode group to its committed length (an array a
    kill kept from being created is skipped)."""
    for name in layout.fields():
        try:
            arr = cast(zarr.Array, group[name])
        except (KeyError, FileNotFoundError):
            continue
        if arr.shape[0] != length:
            arr.resize((length,) + arr.shape[1:])


def _remove_temps(directory: Path, recursive: bool) -> None:
    files = directory.rglob("*") if recursive else directory.glob("*")
    for p in files:
        if p.name.endswith((TMP_SUFFIX, ZARR_TMP_SUFFIX)) and p.is_file():
            p.unlink(missing_ok=True)


def repair(store: EpisodeStore) -> None:
    """Make the store clean for writing: drop what a kill left half-made, write a valid
    ``aborted`` info into torn episodes, close interrupted ones as ``aborted`` at their
    committed length."""
    root = store.path
    for p in [*root.glob(".staging-*"), *root.glob(".trash-*")]:
        shutil.rmtree(p, ignore_errors=True)
    _remove_temps(root, recursive=False)
    _remove_temps(root / "episodes", recursive=False)
    for name in store._names():
        d = root / "episodes" / name
        info, n, why = load(d)
        if why is not None:
            store._warn_torn(name, why)
            _remove_temps(d, recursive=True)
            write_atomic(
                d / "zarr.json", group_json({"info": info.to_dict(), "length": 0}), store.fsync
            )
        elif info.status == "open":
            log.warning(
                "episode %s in %s was interrupted after %d steps: marked aborted", name, root, n
            )
            _remove_temps(d, recursive=True)
            trim(
                zarr.open_group(store.root.store, path=f"episodes/{name}", mode="r+"),
                info.layout,
                n,
            )
            shutil.rmtree(d / "final", ignore_errors=True)  # an end that never committed
            info.status = "aborted"
            write_atomic(
                d / "zarr.json", group_json({"info": info.to_dict(), "length": n}), store.fsync
            )
