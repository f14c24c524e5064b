"""LeRobot dataset v3.0 export and import of stored episodes.

Why: LeRobot's format is how robot-learning datasets are shared; exporting ours lets its
tools and policies train on our demos, importing lets our learners use theirs. Layout written
(what LeRobot 0.4's ``LeRobotDataset`` reads)::

    meta/info.json       codebase_version v3.0, fps, features, data_path / video_path templates
    meta/stats.json      min / max / mean / std / count per feature (images per channel in [0, 1])
    meta/tasks.parquet   index: task text, column task_index
    meta/episodes/chunk-000/file-000.parquet   per episode: length, tasks, data and video ranges
    data/chunk-000/file-000.parquet            all frames of all episodes
    videos/observation.images.<cam>/chunk-000/file-000.mp4   all episodes, one mp4 per camera

Frames carry ``observation.state``, ``action``, ``next.reward``, ``next.done`` and our own
``rlinf.*`` fields (terminated, truncated, intervention, policy_version, timestamp); each
episode's attributes ride along as a JSON column ``rlinf/info`` of the episodes table.
Videos are H.264 in RGB with qp 0 (``libx264rgb``): lossless, so an import gives back the
stored frames exactly. An episode's final observation is one extra video frame after its
``to_timestamp`` (LeRobot never reads it) plus the column ``rlinf/final_state``.
One data file and one video file per camera: fine up to a few GB; LeRobot's size-based file
rotation is not implemented.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import numpy as np

from rlinf_contracts.episode import Episode, EpisodeError, EpisodeInfo, StepLayout
from rlinf_data.store_repair import TORN

log = logging.getLogger(__name__)
CODEBASE_VERSION = "v3.0"
CHUNK = "chunk-000/file-000"
EXTRA = {
    "rlinf.terminated": ("terminated", "bool"),
    "rlinf.truncated": ("truncated", "bool"),
    "rlinf.intervention": ("intervention", "bool"),
    "rlinf.policy_version": ("policy_version", "int64"),
    "rlinf.timestamp": ("timestamp", "float64"),
}


def _video_key(cam: str) -> str:
    return f"observation.images.{cam}"


def _features(layout: StepLayout, fps: int) -> dict[str, Any]:
    def one(dtype: str) -> dict[str, Any]:
        return {"dtype": dtype, "shape": [1], "names": None}

    feats: dict[str, Any] = {
        "observation.state": {
            "dtype": "float32",
            "shape": [layout.state_dim],
            "names": [f"state_{i}" for i in range(layout.state_dim)],
        },
        "action": {
            "dtype": "float32",
            "shape": [layout.action_dim],
            "names": [f"action_{i}" for i in range(layout.action_dim)],
        },
    }
    for cam, (h, w) in layout.cameras.items():
        feats[_video_key(cam)] = {
            "dtype": "video",
            "shape": [h, w, 3],
            "names": ["height", "width", "channels"],
            "info": {
                "video.height": h,
                "video.width": w,
                "video.codec": "h264",
                "video.pix_fmt": "rgb24",
                "video.is_depth_map": False,
                "video.fps": fps,
                "video.channels": 3,
                "has_audio": False,
            },
        }
    feats["next.reward"] = one("float32")
    feats["next.done"] = one("bool")
    feats.update({k: one(dt) for k, (_, dt) in EXTRA.items()})
    for k in ("frame_index", "episode_index", "index", "task_index"):
        feats[k] = one("int64")
    feats["timestamp"] = one("float32")
    return feats


def _stats(values: np.ndarray, image: bool = False) -> dict[str, list]:
    if image:  # per channel, in [0, 1], shaped (3, 1, 1) as LeRobot's image stats are
        v = values.reshape(-1, 3).astype(np.float64) / 255.0
        shape = (3, 1, 1)
    else:
        v = values.reshape(len(values), -1).astype(np.float64)
        shape = (v.shape[1],)
    return {
        "min": v.min(0).reshape(shape).tolist(),
        "max": v.max(0).reshape(shape).tolist(),
        "mean": v.mean(0).reshape(shape).tolist(),
        "std": v.std(0).reshape(shape).tolist(),
        "count": [int(len(values))],
    }


def _write_video(path: Path, frames: Iterable[np.ndarray], hw: tuple[int, int], fps: int) -> None:
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = cast(av.VideoStream, out.add_stream("libx264rgb", rate=fps))
        stream.height, stream.width = hw
        stream.pix_fmt = "rgb24"
        stream.options = {"qp": "0", "preset": "ultrafast"}
        for frame in frames:
            for packet in stream.encode(
                av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
            ):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def export_lerobot(episodes: Iterable[Episode], root: str | Path, robot_type: str = "") -> Path:
    """Write ``episodes`` (e.g. an ``EpisodeStore``) as a LeRobot v3.0 dataset under ``root``
    (torn episodes -- empty, left by a kill -- are skipped)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root, eps = Path(root), list(episodes)
    torn = [
        ep for ep in eps if TORN in ep.info.extra
    ]  # a kill left no layout or step: nothing to export
    if torn:
        log.warning(
            "LeRobot export to %s: skipped %d torn (empty, aborted) episodes", root, len(torn)
        )
        eps = [ep for ep in eps if TORN not in ep.info.extra]
    if not eps:
        raise EpisodeError("nothing to export: no episodes")
    layout, fps = eps[0].info.layout, eps[0].info.control_hz
    for i, ep in enumerate(eps):
        ep.validate()
        if ep.info.layout != layout or ep.info.control_hz != fps:
            raise EpisodeError(
                f"episode {i} has layout {ep.info.layout} at {ep.info.control_hz} Hz; "
                f"episode 0 has {layout} at {fps} Hz: export them separately"
            )
    if fps != int(fps):
        raise EpisodeError(f"LeRobot needs an integer fps; control_hz={fps}")
    fps = int(fps)
    tasks = list(dict.fromkeys(ep.info.instruction or ep.info.task for ep in eps))
    cols: dict[str, list] = {
        k: []
        for k in (
            "observation.state",
            "action",
            "next.reward",
            "next.done",
            *EXTRA,
            "timestamp",
            "frame_index",
            "episode_index",
            "index",
            "task_index",
        )
    }
    meta: list[dict[str, Any]] = []
    video_start = {cam: 0 for cam in layout.cameras}
    index = 0
    for e, ep in enumerate(eps):
        n, s = len(ep), ep.steps
        cols["observation.state"] += list(s["state"])
        cols["action"] += list(s["action"])
        cols["next.reward"] += s["reward"].tolist()
        cols["next.done"] += (s["terminated"] | s["truncated"]).tolist()
        for k, (field, _) in EXTRA.items():
            cols[k] += s[field].tolist()
        cols["timestamp"] += (np.arange(n, dtype=np.float32) / fps).tolist()
        cols["frame_index"] += list(range(n))
        cols["episode_index"] += [e] * n
        cols["index"] += list(range(index, index + n))
        cols["task_index"] += [tasks.index(ep.info.instruction or ep.info.task)] * n
        row: dict[str, Any] = {
            "episode_index": e,
            "tasks": [tasks[cols["task_index"][-1]]] if n else [],
            "length": n,
            "data/chunk_index": 0,
            "data/file_index": 0,
            "dataset_from_index": index,
            "dataset_to_index": index + n,
            "meta/episodes/chunk_index": 0,
            "meta/episodes/file_index": 0,
            "rlinf/info": json.dumps(ep.info.to_dict()),
            "rlinf/final_state": None if ep.final is None else ep.final["state"].tolist(),
        }
        for cam in layout.cameras:
            key, start = _video_key(cam), video_start[cam]
            row.update(
                {
                    f"videos/{key}/chunk_index": 0,
                    f"videos/{key}/file_index": 0,
                    f"videos/{key}/from_timestamp": start / fps,
                    f"videos/{key}/to_timestamp": (start + n) / fps,
                }
            )
            video_start[cam] += n + (ep.final is not None)
        index += n
        meta.append(row)
    vec = {"observation.state": layout.state_dim, "action": layout.action_dim}
    table = pa.table(
        {
            k: (
                pa.array([np.asarray(x, np.float32) for x in v], pa.list_(pa.float32(), vec[k]))
                if k in vec
                else pa.array(v)
            )
            for k, v in cols.items()
        }
    )
    table = table.cast(
        pa.schema(
            [
                pa.field(
                    k,
                    pa.float32()
                    if k in ("next.reward", "timestamp")
                    else table.schema.field(k).type,
                )
                for k in table.column_names
            ]
        )
    )
    (root / "data/chunk-000").mkdir(parents=True, exist_ok=True)
    pq.write_table(table, root / f"data/{CHUNK}.parquet")
    for cam, hw in layout.cameras.items():
        frames = (f for ep in eps for f in _camera_frames(ep, cam))
        _write_video(root / f"videos/{_video_key(cam)}/{CHUNK}.mp4", frames, hw, fps)
    _write_meta(root, eps, layout, fps, tasks, meta, robot_type or _robot_name(eps[0].info))
    return root


def _camera_frames(ep: Episode, cam: str) -> Iterable[np.ndarray]:
    yield from ep.steps[f"images/{cam}"]
    if ep.final is not None:
        yield ep.final[f"images/{cam}"]


def _robot_name(info: EpisodeInfo) -> str:
    return (info.robot or {}).get("robot", "") or "unknown"


def _write_meta(
    root: Path,
    eps: list[Episode],
    layout: StepLayout,
    fps: int,
    tasks: list[str],
    meta: list[dict[str, Any]],
    robot_type: str,
) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "meta/episodes/chunk-000").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(meta), root / f"meta/episodes/{CHUNK}.parquet")
    pd.DataFrame({"task_index": range(len(tasks))}, index=pd.Index(tasks, name="task")).to_parquet(
        root / "meta/tasks.parquet"
    )
    frames = sum(len(ep) for ep in eps)
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": len(eps),
        "total_frames": frames,
        "total_tasks": len(tasks),
        "chunks_size": 1000,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200,
        "fps": fps,
        "splits": {"train": f"0:{len(eps)}"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": (
            "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
            if layout.cameras
            else None
        ),
        "features": _features(layout, fps),
    }
    (root / "meta/info.json").write_text(json.dumps(info, indent=2))
    cat = {k: np.concatenate([ep.steps[k] for ep in eps]) for k in _ep_fields(layout)}
    stats = {
        "observation.state": _stats(cat["state"]),
        "action": _stats(cat["action"]),
        "next.reward": _stats(cat["reward"]),
    }
    for cam in layout.cameras:
        stats[_video_key(cam)] = _stats(cat[f"images/{cam}"], image=True)
    (root / "meta/stats.json").write_text(json.dumps(stats, indent=2))


def _ep_fields(layout: StepLayout) -> list[str]:
    return ["state", "action", "reward", *(f"images/{c}" for c in layout.cameras)]


def _read_video(path: Path, fps: int) -> dict[int, np.ndarray]:
    """Every frame of an mp4 by frame number (pts * fps)."""
    import av

    frames = {}
    with av.open(str(path)) as f:
        for fr in f.decode(video=0):
            # a decoded mp4 frame has both a pts and its stream's time base
            t = float(fr.pts * fr.time_base)  # type: ignore[operator]  # both set, see above
            frames[int(round(t * fps))] = fr.to_ndarray(format="rgb24")
    return frames


def import_lerobot(root: str | Path) -> list[Episode]:
    """Read a LeRobot v3.0 dataset (ours or any with ``observation.state`` and ``action``) back
    into episodes; our own exports come back with their attributes and final observations."""
    import pyarrow.parquet as pq

    root = Path(root)
    info = json.loads((root / "meta/info.json").read_text())
    if info.get("codebase_version") != CODEBASE_VERSION:
        raise EpisodeError(
            f"{root}/meta/info.json: codebase_version {info.get('codebase_version')!r}, "
            f"only {CODEBASE_VERSION} is read"
        )
    feats, _fps = info["features"], int(info["fps"])  # a dataset without an int fps is refused
    cams = {
        k[len("observation.images.") :]: tuple(v["shape"][:2])
        for k, v in feats.items()
        if v["dtype"] == "video"
    }
    layout = StepLayout(feats["observation.state"]["shape"][0], feats["action"]["shape"][0], cams)
    episodes = pq.read_table(root / "meta/episodes").to_pylist()
    data = {}
    for path in sorted((root / "data").rglob("*.parquet")):
        data[path.relative_to(root / "data").with_suffix("").as_posix()] = pq.read_table(
            path
        ).to_pydict()
    videos: dict[str, dict[int, np.ndarray]] = {}
    out = []
    for row in sorted(episodes, key=lambda r: r["episode_index"]):
        out.append(_import_episode(root, info, row, layout, data, videos))
    return out


def _import_episode(
    root: Path,
    info: dict,
    row: dict,
    layout: StepLayout,
    data: dict,
    videos: dict[str, dict[int, np.ndarray]],
) -> Episode:
    fps = int(info["fps"])
    file = f"chunk-{row['data/chunk_index']:03d}/file-{row['data/file_index']:03d}"
    cols = data[file]
    idx = np.asarray(cols["index"])
    sel = np.flatnonzero((idx >= row["dataset_from_index"]) & (idx < row["dataset_to_index"]))
    n = len(sel)

    def col(name: str, dtype: str, default: Any = 0) -> np.ndarray:
        return np.asarray(
            [cols[name][i] for i in sel] if name in cols else [default] * n, dtype
        ).reshape(n, -1)

    steps = {
        "state": col("observation.state", "float32"),
        "action": col("action", "float32"),
        "reward": col("next.reward", "float32")[:, 0],
    }
    for key, (field, dtype) in EXTRA.items():
        steps[field] = col(key, dtype)[:, 0]
    if (
        "rlinf.terminated" not in cols and "next.done" in cols
    ):  # a foreign dataset: done = terminated
        steps["terminated"] = col("next.done", "bool")[:, 0]
    final_state = row.get("rlinf/final_state")
    final = None if final_state is None else {"state": np.asarray(final_state, np.float32)}
    for cam in layout.cameras:
        key = _video_key(cam)
        path = root / info["video_path"].format(
            video_key=key,
            chunk_index=row[f"videos/{key}/chunk_index"],
            file_index=row[f"videos/{key}/file_index"],
        )
        frames = videos.setdefault(str(path), _read_video(path, fps))
        start = int(round(row[f"videos/{key}/from_timestamp"] * fps))
        steps[f"images/{cam}"] = (
            np.stack([frames[start + t] for t in range(n)])
            if n
            else np.zeros((0, *layout.cameras[cam], 3), np.uint8)
        )
        if final is not None:
            final[f"images/{cam}"] = frames[start + n]
    if row.get("rlinf/info"):
        ep_info = EpisodeInfo.from_dict(json.loads(row["rlinf/info"]))
    else:
        ep_info = EpisodeInfo(
            task=(row.get("tasks") or ["unknown"])[0],
            layout=layout,
            control_hz=float(fps),
            status="complete",
            extra={"lerobot_episode_index": row["episode_index"]},
        )
    episode = Episode(ep_info, steps, final)
    episode.validate()
    return episode
