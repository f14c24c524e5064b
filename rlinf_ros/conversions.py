"""ROS 2 message <-> numpy conversions (no cv_bridge).

Why our own: cv_bridge needs OpenCV's C++ build and a system ROS; the canonical observation
map needs only RGB uint8 arrays, and image encodings are a small table. Every function here is
pure (messages in, arrays out) and tested without DDS.

Conventions: stamps are float seconds of wall-clock time; a builder called without ``stamp``
stamps the message *now* (a zero stamp on the wire reads as "no time" to rosbag, TF and
message filters; pass ``stamp=0.0`` explicitly for a JointTrajectory that should start on
receipt). Joint vectors follow the *caller's* name order (messages
from other publishers may list joints in any order); quaternions are [x, y, z, w].

>>> import numpy as np
>>> img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
>>> msg = numpy_to_image(img, "bgr8")
>>> (msg.encoding, msg.height, msg.width, msg.step)
('bgr8', 2, 3, 9)
>>> bool((image_to_rgb(msg) == img[..., ::-1]).all())
True
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import CameraInfo, Image, JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_drivers.cameras import CameraIntrinsics
from robot_drivers.types import EEPose

log = logging.getLogger(__name__)


class ConversionError(ValueError):
    """A message cannot be converted; the message names the field and value."""


# encoding -> (numpy dtype, channels); sensor_msgs/image_encodings.hpp names
ENCODINGS: dict[str, tuple[str, int]] = {
    "rgb8": ("u1", 3),
    "bgr8": ("u1", 3),
    "rgba8": ("u1", 4),
    "bgra8": ("u1", 4),
    "mono8": ("u1", 1),
    "8UC1": ("u1", 1),
    "8UC3": ("u1", 3),
    "mono16": ("u2", 1),
    "16UC1": ("u2", 1),
    "32FC1": ("f4", 1),
}


# ---- time --------------------------------------------------------------------------------
def stamp_or_now(stamp: float | None) -> float:
    """``stamp`` as given, or the wall-clock time now when None (the builders' default)."""
    return time.time() if stamp is None else stamp


def to_time_msg(t: float) -> Time:
    sec = int(np.floor(t))
    return Time(sec=sec, nanosec=min(int(round((t - sec) * 1e9)), 999_999_999))


def stamp_to_sec(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def to_duration_msg(t: float) -> Duration:
    sec = int(np.floor(t))
    return Duration(sec=sec, nanosec=min(int(round((t - sec) * 1e9)), 999_999_999))


def duration_to_sec(d: Duration) -> float:
    return d.sec + d.nanosec * 1e-9


# ---- images ------------------------------------------------------------------------------
def numpy_to_image(
    arr: np.ndarray, encoding: str = "rgb8", stamp: float | None = None, frame_id: str = ""
) -> Image:
    """Array ``[H, W]`` or ``[H, W, C]`` -> Image with ``encoding`` (dtype and channels checked)."""
    if encoding not in ENCODINGS:
        raise ConversionError(
            f"unsupported image encoding {encoding!r}; supported: {sorted(ENCODINGS)}"
        )
    dtype, ch = ENCODINGS[encoding]
    arr = np.asarray(arr)
    shape_ok = (arr.ndim == 2 and ch == 1) or (arr.ndim == 3 and arr.shape[2] == ch)
    if not shape_ok or arr.dtype != np.dtype(dtype):
        raise ConversionError(
            f"encoding {encoding!r} needs dtype {np.dtype(dtype)} with {ch} channel(s), "
            f"got {arr.dtype} {arr.shape}"
        )
    msg = Image()
    msg.header.stamp = to_time_msg(stamp_or_now(stamp))
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(arr.shape[0]), int(arr.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = int(sys.byteorder == "big")
    msg.step = msg.width * ch * arr.dtype.itemsize
    msg.data = np.ascontiguousarray(arr).tobytes()
    return msg


def image_to_numpy(msg: Image) -> np.ndarray:
    """Image -> array ``[H, W]`` (one channel) or ``[H, W, C]`` in the message's own encoding.

    Honours ``step`` (row padding) and ``is_bigendian``; the result is a read-only view when
    no copy was needed.
    """
    if msg.encoding not in ENCODINGS:
        raise ConversionError(
            f"image encoding {msg.encoding!r} is not supported; supported: {sorted(ENCODINGS)}"
        )
    dtype, ch = ENCODINGS[msg.encoding]
    dt = np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<")
    row = msg.width * ch * dt.itemsize
    if msg.step < row or len(msg.data) < msg.step * msg.height:
        raise ConversionError(
            f"image {msg.width}x{msg.height} {msg.encoding}: step={msg.step}, "
            f"{len(msg.data)} bytes is too small (need step >= {row})"
        )
    buf = np.frombuffer(msg.data, dtype=np.uint8, count=msg.step * msg.height).reshape(
        msg.height, msg.step
    )
    arr = buf[:, :row].view(dt).reshape(msg.height, msg.width, ch)
    if dt.byteorder not in ("=", "|") and dt.byteorder != (
        "<" if sys.byteorder == "little" else ">"
    ):
        arr = arr.astype(dt.newbyteorder("="))
    return arr[..., 0] if ch == 1 else arr


def image_to_rgb(msg: Image) -> np.ndarray:
    """Image -> RGB uint8 ``[H, W, 3]`` for the canonical observation map (mono is replicated)."""
    arr = image_to_numpy(msg)
    enc = msg.encoding
    if enc in ("rgb8", "8UC3"):
        return arr
    if enc == "bgr8":
        return arr[..., ::-1]
    if enc == "rgba8":
        return arr[..., :3]
    if enc == "bgra8":
        return arr[..., 2::-1]
    if arr.dtype == np.uint8:
        return np.repeat(arr[..., None], 3, axis=2)
    raise ConversionError(
        f"image encoding {enc!r} (depth) has no RGB form; subscribe to a color topic"
    )


# ---- camera info -------------------------------------------------------------------------
def camera_info_msg(
    intr: CameraIntrinsics, stamp: float | None = None, frame_id: str = ""
) -> CameraInfo:
    msg = CameraInfo()
    msg.header.stamp = to_time_msg(stamp_or_now(stamp))
    msg.header.frame_id = frame_id
    msg.width, msg.height = intr.width, intr.height
    msg.distortion_model = "plumb_bob"
    msg.d = [float(x) for x in intr.distortion]
    msg.k = intr.k().reshape(-1).tolist()
    msg.r = np.eye(3).reshape(-1).tolist()
    msg.p = [intr.fx, 0.0, intr.cx, 0.0, 0.0, intr.fy, intr.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return msg


def camera_info_to_intrinsics(msg: CameraInfo) -> CameraIntrinsics:
    k = np.asarray(msg.k).reshape(3, 3)
    return CameraIntrinsics(
        int(msg.width),
        int(msg.height),
        float(k[0, 0]),
        float(k[1, 1]),
        float(k[0, 2]),
        float(k[1, 2]),
        tuple(float(x) for x in msg.d),
    )


# ---- joints ------------------------------------------------------------------------------
def joint_state_msg(
    names: list[str],
    position: np.ndarray,
    velocity: np.ndarray | None = None,
    effort: np.ndarray | None = None,
    stamp: float | None = None,
) -> JointState:
    msg = JointState()
    msg.header.stamp = to_time_msg(stamp_or_now(stamp))
    msg.name = list(names)
    msg.position = np.asarray(position, dtype=np.float64)
    msg.velocity = np.asarray(velocity if velocity is not None else [], dtype=np.float64)
    msg.effort = np.asarray(effort if effort is not None else [], dtype=np.float64)
    return msg


def _reorder(msg_names: list[str], values: object, names: list[str], field: str) -> np.ndarray:
    vals = np.asarray(values, dtype=np.float64)
    if vals.size == 0:
        return np.zeros(len(names))
    index = {n: i for i, n in enumerate(msg_names)}
    missing = [n for n in names if n not in index]
    if missing:
        raise ConversionError(
            f"JointState lacks joints {missing} (has {list(msg_names)}); "
            "check joint_prefix / joint names in the config"
        )
    if len(vals) != len(msg_names):
        raise ConversionError(
            f"JointState.{field} has {len(vals)} values for {len(msg_names)} names"
        )
    return vals[[index[n] for n in names]]


def joint_state_to_arrays(
    msg: JointState, names: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position, velocity, effort) in the order of ``names`` (empty fields -> zeros)."""
    return tuple(
        _reorder(list(msg.name), getattr(msg, f), names, f)  # type: ignore[return-value]  # 3 fields
        for f in ("position", "velocity", "effort")
    )


def arm_positions(msg: JointState, arms: list[list[str]]) -> np.ndarray | None:
    """Joint positions of one or more arms (each a list of joint names), concatenated in arm
    order; None (with a warning) when the message lacks a joint, so callers just skip it."""
    try:
        return np.concatenate([joint_state_to_arrays(msg, names)[0] for names in arms])
    except ConversionError as e:
        log.warning("joint_states: %s", e)
        return None


# ---- poses -------------------------------------------------------------------------------
def pose_msg(pose: EEPose, stamp: float | None = None, frame_id: str = "base") -> PoseStamped:
    msg = PoseStamped()
    msg.header.stamp = to_time_msg(stamp_or_now(stamp))
    msg.header.frame_id = frame_id
    p, q = pose.position, pose.quat_xyzw
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in p)
    o = msg.pose.orientation
    o.x, o.y, o.z, o.w = (float(v) for v in q)
    return msg


def pose_from_msg(msg: PoseStamped) -> EEPose:
    p, o = msg.pose.position, msg.pose.orientation
    quat = np.array([o.x, o.y, o.z, o.w])
    n = np.linalg.norm(quat)
    if not np.isfinite(n) or n < 1e-9:
        raise ConversionError(f"PoseStamped orientation {quat.tolist()} is not a valid quaternion")
    return EEPose(np.array([p.x, p.y, p.z]), quat / n)


# ---- trajectories ------------------------------------------------------------------------
@dataclass(frozen=True)
class Trajectory:
    """Waypoints ``positions [N, J]`` reached at ``times [N]`` seconds after ``start``."""

    names: list[str]
    times: np.ndarray
    positions: np.ndarray
    start: float = 0.0

    def sample(self, t: float) -> np.ndarray:
        """Linear interpolation at absolute time ``t`` (held at the ends; from the first point)."""
        rel = t - self.start
        return np.array(
            [
                np.interp(rel, self.times, self.positions[:, j])
                for j in range(self.positions.shape[1])
            ]
        )

    @property
    def end(self) -> float:
        return self.start + float(self.times[-1])


def trajectory_msg(
    names: list[str], positions: np.ndarray, times: np.ndarray, stamp: float | None = None
) -> JointTrajectory:
    """``positions [N, J]`` at ``times [N]`` (seconds from ``stamp``, default now) ->
    JointTrajectory.

    The stamp is when the motion starts (as for ros2_control's trajectory controller), so a
    command that waited in a queue is not stretched; ``stamp=0.0`` means "start on receipt".
    """
    positions = np.atleast_2d(np.asarray(positions, dtype=np.float64))
    times = np.atleast_1d(np.asarray(times, dtype=np.float64))
    if positions.shape != (len(times), len(names)):
        raise ConversionError(
            f"trajectory positions {positions.shape} != (points {len(times)}, joints {len(names)})"
        )
    msg = JointTrajectory()
    msg.header.stamp = to_time_msg(stamp_or_now(stamp))
    msg.joint_names = list(names)
    for q, t in zip(positions, times):
        pt = JointTrajectoryPoint()
        pt.positions = q
        pt.time_from_start = to_duration_msg(float(t))
        msg.points.append(pt)  # type: ignore[attr-defined]  # a list at run time
    return msg


def trajectory_from_msg(
    msg: JointTrajectory, names: list[str], now: float, q_now: np.ndarray | None = None
) -> Trajectory:
    """JointTrajectory -> :class:`Trajectory` in ``names`` order; a zero stamp means "start now".

    With ``q_now`` the motion starts from the current joints (a point at time 0 is prepended
    when the first waypoint lies in the future), as ros2_control's trajectory controller does.
    """
    if not msg.points:
        raise ConversionError("JointTrajectory has no points")
    cols = _reorder(
        list(msg.joint_names), np.arange(len(msg.joint_names)), names, "joint_names"
    ).astype(int)
    pos = np.empty((len(msg.points), len(names)))
    times = np.empty(len(msg.points))
    for i, pt in enumerate(msg.points):
        if len(pt.positions) != len(msg.joint_names):
            raise ConversionError(
                f"JointTrajectory point {i} has {len(pt.positions)} positions "
                f"for {len(msg.joint_names)} joints"
            )
        pos[i] = np.asarray(pt.positions)[cols]
        times[i] = duration_to_sec(pt.time_from_start)
    if np.any(np.diff(times) < 0):
        raise ConversionError(
            f"JointTrajectory time_from_start must not decrease: {times.tolist()}"
        )
    if q_now is not None and times[0] > 0:
        times = np.concatenate([[0.0], times])
        pos = np.vstack([np.asarray(q_now, dtype=np.float64)[None], pos])
    stamp = stamp_to_sec(msg.header.stamp)
    return Trajectory(list(names), times, pos, start=stamp if stamp > 0 else now)
