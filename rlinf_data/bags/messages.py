"""ROS 2 messages <-> numpy: what each supported message type contributes to an episode.

Why registries keyed by the bag's type name: a bag says the type of every topic, and a topic
map only says which topic fills which field. Looking the type up here picks how to take a
vector (a JointState's positions, a trajectory's first point, a multi-array's data, a pose) or
an RGB frame out of it, and how an export writes one; an unsupported type is refused naming
the supported ones. Decoded messages come from ``mcap_ros2`` (attribute access, no rclpy);
encoded ones are plain dicts its writer serialises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlinf_contracts.registry import Registry
from rlinf_data.bags.topics import BagError, Source

JOINT_FIELDS = ("position", "velocity", "effort")


def stamp_ns(msg: Any, log_time: int) -> int:
    """The message's header stamp in ns; ``log_time`` when it has none (or a zero one)."""
    header = getattr(msg, "header", None)
    if header is None:
        return int(log_time)
    t = int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)
    return t if t else int(log_time)


def header(t_ns: int) -> dict[str, Any]:
    return {
        "stamp": {"sec": t_ns // 1_000_000_000, "nanosec": t_ns % 1_000_000_000},
        "frame_id": "",
    }


def _select(values: Any, names: list[str], src: Source, what: str) -> np.ndarray:
    arr = np.asarray(values, np.float64)
    if not src.names:
        return arr
    index = {n: i for i, n in enumerate(names)}
    missing = [n for n in src.names if n not in index]
    if missing:
        raise BagError(f"topic {src.topic!r}: {what} has no joint(s) {missing}; it has {names}")
    return arr[[index[n] for n in src.names]]


def _joint_state(msg: Any, src: Source) -> np.ndarray:
    if src.field not in JOINT_FIELDS:
        raise BagError(f"topic {src.topic!r}: field {src.field!r}; use one of {JOINT_FIELDS}")
    return _select(getattr(msg, src.field), list(msg.name), src, "the JointState")


def _trajectory(msg: Any, src: Source) -> np.ndarray | None:
    if not msg.points:  # an empty trajectory commands nothing: no sample
        return None
    return _select(msg.points[0].positions, list(msg.joint_names), src, "the JointTrajectory")


def _pose(p: Any) -> np.ndarray:
    q = p.orientation
    return np.array([p.position.x, p.position.y, p.position.z, q.x, q.y, q.z, q.w], np.float64)


def _names(src: Source, n: int) -> list[str]:
    return list(src.names) if src.names else [f"joint_{i}" for i in range(n)]


def _enc_joint_state(v: np.ndarray, t: int, src: Source) -> dict[str, Any]:
    msg: dict[str, Any] = {"header": header(t), "name": _names(src, len(v))}
    msg.update({f: (v.tolist() if f == src.field else []) for f in JOINT_FIELDS})
    return msg


def _enc_trajectory(v: np.ndarray, t: int, src: Source) -> dict[str, Any]:
    point = {
        "positions": v.tolist(),
        "velocities": [],
        "accelerations": [],
        "effort": [],
        "time_from_start": {"sec": 0, "nanosec": 0},
    }
    return {"header": header(t), "joint_names": _names(src, len(v)), "points": [point]}


def _enc_array(v: np.ndarray, t: int, src: Source) -> dict[str, Any]:
    return {"layout": {"dim": [], "data_offset": 0}, "data": v.tolist()}


@dataclass(frozen=True)
class VectorType:
    """How a message type becomes a vector (None: this message holds no sample) and back."""

    decode: Callable[[Any, Source], np.ndarray | None]
    encode: Callable[[np.ndarray, int, Source], dict[str, Any]] | None = None


VECTOR_TYPES: Registry[VectorType] = Registry("vector message type")
VECTOR_TYPES.add("sensor_msgs/msg/JointState", VectorType(_joint_state, _enc_joint_state))
VECTOR_TYPES.add("trajectory_msgs/msg/JointTrajectory", VectorType(_trajectory, _enc_trajectory))
for _t in ("Float32MultiArray", "Float64MultiArray"):
    VECTOR_TYPES.add(
        f"std_msgs/msg/{_t}",
        VectorType(lambda m, s: np.asarray(m.data, np.float64), _enc_array),
    )
for _t in ("Float32", "Float64"):
    VECTOR_TYPES.add(f"std_msgs/msg/{_t}", VectorType(lambda m, s: np.array([m.data], np.float64)))
VECTOR_TYPES.add("geometry_msgs/msg/PoseStamped", VectorType(lambda m, s: _pose(m.pose)))
VECTOR_TYPES.add("geometry_msgs/msg/Pose", VectorType(lambda m, s: _pose(m)))

# raw Image encodings -> (channels, the channel order that gives RGB)
ENCODINGS: dict[str, tuple[int, list[int]]] = {
    "rgb8": (3, [0, 1, 2]),
    "bgr8": (3, [2, 1, 0]),
    "rgba8": (4, [0, 1, 2]),
    "bgra8": (4, [2, 1, 0]),
    "mono8": (1, [0, 0, 0]),
}


def _image(msg: Any, topic: str) -> np.ndarray:
    enc = str(msg.encoding)
    if enc not in ENCODINGS:
        raise BagError(
            f"topic {topic!r}: image encoding {enc!r} is not read; supported: {sorted(ENCODINGS)}"
        )
    ch, order = ENCODINGS[enc]
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    rows = np.frombuffer(bytes(msg.data), np.uint8)
    if rows.size < h * step or step < w * ch:
        raise BagError(
            f"topic {topic!r}: image of {rows.size} bytes is too short for {h}x{w} {enc} "
            f"with step {step}"
        )
    px = rows[: h * step].reshape(h, step)[:, : w * ch].reshape(h, w, ch)
    return np.ascontiguousarray(px[:, :, order])


def _compressed(msg: Any, topic: str) -> np.ndarray:
    try:
        import io

        from PIL import Image
    except ImportError:  # pragma: no cover - pillow comes with the sim extra
        raise BagError(
            f"topic {topic!r}: CompressedImage needs pillow (pip install pillow)"
        ) from None
    try:
        with Image.open(io.BytesIO(bytes(msg.data))) as im:
            return np.asarray(im.convert("RGB"), np.uint8)
    except OSError as e:
        raise BagError(f"topic {topic!r}: cannot decode {msg.format!r} image: {e}") from None


def _enc_image(frame: np.ndarray, t: int) -> dict[str, Any]:
    h, w, _ = frame.shape
    return {
        "header": header(t),
        "height": h,
        "width": w,
        "encoding": "rgb8",
        "is_bigendian": 0,
        "step": w * 3,
        "data": np.ascontiguousarray(frame, np.uint8).tobytes(),
    }


@dataclass(frozen=True)
class ImageType:
    """How a message type becomes an RGB ``[H, W, 3]`` uint8 frame (and back)."""

    decode: Callable[[Any, str], np.ndarray]
    encode: Callable[[np.ndarray, int], dict[str, Any]] | None = None


IMAGE_TYPES: Registry[ImageType] = Registry("image message type")
IMAGE_TYPES.add("sensor_msgs/msg/Image", ImageType(_image, _enc_image))
IMAGE_TYPES.add("sensor_msgs/msg/CompressedImage", ImageType(_compressed))
