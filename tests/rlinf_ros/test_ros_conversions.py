"""Message <-> numpy conversions and the approximate-time synchroniser (pure, no DDS)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from sensor_msgs.msg import Image

from rlinf_ros.conversions import (
    ConversionError,
    camera_info_msg,
    camera_info_to_intrinsics,
    image_to_numpy,
    image_to_rgb,
    joint_state_msg,
    joint_state_to_arrays,
    numpy_to_image,
    pose_from_msg,
    pose_msg,
    stamp_to_sec,
    to_time_msg,
    trajectory_from_msg,
    trajectory_msg,
)
from rlinf_ros.sync import ApproxTimeSync
from robot_drivers.cameras import CameraIntrinsics
from robot_drivers.types import EEPose

RNG = np.random.default_rng(0)


@pytest.mark.parametrize(
    "encoding,dtype,shape",
    [
        ("rgb8", np.uint8, (4, 5, 3)),
        ("bgr8", np.uint8, (4, 5, 3)),
        ("rgba8", np.uint8, (4, 5, 4)),
        ("mono8", np.uint8, (4, 5)),
        ("16UC1", np.uint16, (4, 5)),
        ("32FC1", np.float32, (4, 5)),
    ],
)
def test_image_round_trip_per_encoding(encoding: str, dtype, shape) -> None:
    arr = (RNG.uniform(0, 200, size=shape)).astype(dtype)
    msg = numpy_to_image(arr, encoding, stamp=12.5, frame_id="cam")
    assert msg.step == shape[1] * (shape[2] if len(shape) == 3 else 1) * np.dtype(dtype).itemsize
    assert len(msg.data) == msg.step * msg.height
    back = image_to_numpy(msg)
    assert back.dtype == dtype and np.array_equal(back, arr)
    assert stamp_to_sec(msg.header.stamp) == pytest.approx(12.5)


def test_rgb_view_of_each_color_encoding() -> None:
    rgb = RNG.integers(0, 255, size=(3, 4, 3), dtype=np.uint8)
    assert np.array_equal(image_to_rgb(numpy_to_image(rgb, "rgb8")), rgb)
    assert np.array_equal(
        image_to_rgb(numpy_to_image(np.ascontiguousarray(rgb[..., ::-1]), "bgr8")), rgb
    )
    bgra = np.concatenate([rgb[..., ::-1], np.full((3, 4, 1), 255, np.uint8)], axis=2)
    assert np.array_equal(image_to_rgb(numpy_to_image(bgra, "bgra8")), rgb)
    mono = rgb[..., 0].copy()
    assert np.array_equal(image_to_rgb(numpy_to_image(mono, "mono8")), np.stack([mono] * 3, axis=2))
    with pytest.raises(ConversionError, match="depth"):
        image_to_rgb(numpy_to_image(np.zeros((2, 2), np.uint16), "16UC1"))


def test_padded_rows_and_big_endian_images_decode() -> None:
    depth = np.array([[1, 2, 3], [400, 500, 60000]], dtype=np.uint16)
    msg = Image(height=2, width=3, encoding="16UC1", is_bigendian=1, step=8)  # 2 pad bytes per row
    rows = [depth[r].astype(">u2").tobytes() + b"\x00\x00" for r in range(2)]
    msg.data = b"".join(rows)
    out = image_to_numpy(msg)
    assert np.array_equal(out, depth) and out.dtype.byteorder in ("=", "<", "|")


def test_bad_images_name_the_problem() -> None:
    with pytest.raises(ConversionError, match="yuv422"):
        numpy_to_image(np.zeros((2, 2, 2), np.uint8), "yuv422")
    with pytest.raises(ConversionError, match="rgb8.*uint8 with 3"):
        numpy_to_image(np.zeros((2, 2), np.uint8), "rgb8")
    short = Image(height=2, width=2, encoding="rgb8", step=6)
    short.data = b"\x00" * 6
    with pytest.raises(ConversionError, match="too small"):
        image_to_numpy(short)


def test_camera_info_round_trip() -> None:
    intr = CameraIntrinsics(224, 224, 190.0, 191.0, 111.5, 112.0, (0.1, -0.2, 0.0, 0.0, 0.01))
    msg = camera_info_msg(intr, stamp=3.0, frame_id="cam")
    assert msg.distortion_model == "plumb_bob" and list(msg.p)[:3] == [190.0, 0.0, 111.5]
    assert camera_info_to_intrinsics(msg) == intr


def test_joint_state_reorders_by_name_and_reports_missing() -> None:
    names = [f"panda_joint{i}" for i in range(1, 8)]
    q = np.arange(7) * 0.1
    msg = joint_state_msg(names[::-1], q[::-1], stamp=1.25)
    pos, vel, eff = joint_state_to_arrays(msg, names)
    assert np.allclose(pos, q) and np.allclose(vel, 0) and np.allclose(eff, 0)
    with pytest.raises(ConversionError, match="fr3_joint1"):
        joint_state_to_arrays(msg, ["fr3_joint1"])


def test_pose_round_trip_normalises_quaternion() -> None:
    pose = EEPose(np.array([0.3, -0.1, 0.5]), np.array([0.0, 1.0, 0.0, 0.0]))
    back = pose_from_msg(pose_msg(pose, stamp=2.0))
    assert np.allclose(back.position, pose.position) and np.allclose(back.quat_xyzw, pose.quat_xyzw)
    bad = pose_msg(EEPose(np.zeros(3), np.zeros(4)))
    with pytest.raises(ConversionError, match="quaternion"):
        pose_from_msg(bad)


def test_trajectory_round_trip_and_sampling() -> None:
    names = ["a", "b"]
    msg = trajectory_msg(
        names[::-1], np.array([[1.0, 0.0], [3.0, 2.0]]), np.array([0.5, 1.0]), stamp=0.0
    )
    traj = trajectory_from_msg(
        msg, names, now=100.0, q_now=np.array([0.0, 0.0])
    )  # zero stamp: start on receipt
    assert traj.start == 100.0 and traj.end == pytest.approx(101.0)
    assert np.allclose(traj.sample(100.0), [0.0, 0.0])
    assert np.allclose(traj.sample(100.25), [0.0, 0.5])  # halfway to the first waypoint (b=1, a=0)
    assert np.allclose(traj.sample(100.75), [1.0, 2.0])
    assert np.allclose(traj.sample(200.0), [2.0, 3.0])
    with pytest.raises(ConversionError, match=r"\(points 1, joints 2\)"):
        trajectory_msg(names, np.zeros((2, 2)), np.array([1.0]))


def test_time_msg_round_trip() -> None:
    for t in (0.0, 1.5, 1_763_000_000.123456):
        assert stamp_to_sec(to_time_msg(t)) == pytest.approx(t, abs=1e-6)


def test_sync_returns_newest_matched_set_once() -> None:
    s = ApproxTimeSync(["joints", "cam"], slop=0.01)
    for k in range(10):  # joints at 100 Hz
        s.add("joints", 1.0 + 0.01 * k, f"j{k}")
    s.add("cam", 1.033, "c0")
    s.add("cam", 1.066, "c1")
    got = s.pop_newest()
    assert got["cam"] == (1.066, "c1") and got["joints"][1] == "j7"
    assert s.pop_newest() is None  # consumed; j8/j9 wait for a newer camera frame
    s.add("cam", 1.2, "c2")
    assert s.pop_newest() is None  # nothing within slop
    s.add("joints", 1.205, "j20")
    assert s.pop_newest()["joints"] == (1.205, "j20")


def test_sync_handles_out_of_order_and_validates() -> None:
    s = ApproxTimeSync(["a", "b"], slop=0.05)
    s.add("a", 2.0, "a2")
    s.add("a", 1.0, "a1")
    s.add("b", 1.01, "b1")
    assert s.pop_newest() == {"a": (1.0, "a1"), "b": (1.01, "b1")}
    with pytest.raises(KeyError, match="known"):
        s.add("c", 0.0, None)
    with pytest.raises(ValueError, match="slop"):
        ApproxTimeSync(["a"], slop=-1)
