"""The ``recorded`` camera source: frames replayed from a file or an episode store, in a loop.

Unit checks of the backend (robot_drivers.cameras) and, over real rclpy, the camera node
publishing a recorded episode's frames in order with their pixels intact."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from robot_drivers.cameras import CameraConfig, CameraError, make_camera


def _frames(n: int = 3, h: int = 8, w: int = 6) -> np.ndarray:
    # frame i is filled with value 10 * (i + 1): order is visible in any pixel
    return np.stack([np.full((h, w, 3), 10 * (i + 1), np.uint8) for i in range(n)])


def test_recorded_camera_replays_npz_and_npy_in_a_loop(tmp_path: Path) -> None:
    frames = _frames()
    np.savez(tmp_path / "rec.npz", **{"images/wrist": frames, "other": np.zeros(3)})
    np.save(tmp_path / "rec.npy", frames)
    for path in (tmp_path / "rec.npz", tmp_path / "rec.npy"):
        cam = make_camera(
            CameraConfig(name="wrist", backend="recorded", width=6, height=8, recording=str(path))
        )
        cam.connect()
        seen = [int(cam.read().color[0, 0, 0]) for _ in range(7)]
        assert seen == [10, 20, 30, 10, 20, 30, 10]
        assert (cam.intrinsics.width, cam.intrinsics.height) == (6, 8)


def test_recorded_camera_errors_name_the_problem(tmp_path: Path) -> None:
    np.save(tmp_path / "rec.npy", _frames())
    with pytest.raises(CameraError, match="camera.height=224 camera.width=224"):
        make_camera(CameraConfig(backend="recorded", recording=str(tmp_path / "rec.npy"))).connect()
    with pytest.raises(CameraError, match="needs camera.recording"):
        make_camera(CameraConfig(backend="recorded")).connect()
    np.savez(tmp_path / "two.npz", a=_frames(), b=_frames())
    with pytest.raises(CameraError, match=r"arrays \['a', 'b'\]"):
        make_camera(
            CameraConfig(backend="recorded", width=6, height=8, recording=str(tmp_path / "two.npz"))
        ).connect()
    np.save(tmp_path / "float.npy", _frames().astype(np.float32))
    with pytest.raises(CameraError, match="uint8"):
        cfg = CameraConfig(
            backend="recorded", width=6, height=8, recording=str(tmp_path / "float.npy")
        )
        make_camera(cfg).connect()


def _store_with_frames(path: Path, frames: np.ndarray) -> None:
    from rlinf_contracts.episode import Episode, EpisodeInfo, StepLayout
    from rlinf_data.store import EpisodeStore

    n, h, w, _ = frames.shape
    layout = StepLayout(state_dim=2, action_dim=1, cameras={"camera": (h, w)})
    steps = {
        "state": np.zeros((n, 2), np.float32),
        "action": np.zeros((n, 1), np.float32),
        "images/camera": frames,
        "reward": np.zeros(n, np.float32),
        "terminated": np.zeros(n, bool),
        "truncated": np.zeros(n, bool),
        "intervention": np.zeros(n, bool),
        "policy_version": np.zeros(n, np.int64),
        "timestamp": np.zeros(n, np.float64),
    }
    EpisodeStore(path).write(
        Episode(EpisodeInfo(task="test", layout=layout, status="complete"), steps)
    )


@pytest.mark.ros
def test_camera_node_publishes_recorded_episode_frames(tmp_path: Path, ros_domain_id: int) -> None:
    pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image

    from rlinf_ros.config import CameraNodeConfig
    from rlinf_ros.conversions import image_to_rgb
    from rlinf_ros.nodes.camera import CameraNode
    from rlinf_ros.nodes.common import reliable_qos

    frames = _frames(4, 24, 32)
    _store_with_frames(tmp_path / "store", frames)
    cfg = CameraNodeConfig(
        name="camera",
        camera=CameraConfig(
            name="camera",
            backend="recorded",
            width=32,
            height=24,
            fps=50.0,
            recording=str(tmp_path / "store"),
        ),
        image_topic="rec_cam/image",
    )
    got: list[np.ndarray] = []
    rclpy.init()
    try:
        cam = CameraNode(cfg)
        sub = rclpy.create_node("rec_cam_sub")
        sub.create_subscription(
            Image, "rec_cam/image", lambda m: got.append(image_to_rgb(m)), reliable_qos(50)
        )
        ex = SingleThreadedExecutor()
        ex.add_node(cam)
        ex.add_node(sub)
        deadline = time.time() + 60
        while len(got) < 10 and time.time() < deadline:
            ex.spin_once(timeout_sec=0.05)
        ex.shutdown()
        cam.close()
        cam.destroy_node()
        sub.destroy_node()
    finally:
        rclpy.try_shutdown()
    assert len(got) >= 10, f"only {len(got)} frames in 60 s"
    assert all(f.shape == (24, 32, 3) for f in got)
    k0 = int(got[0][0, 0, 0]) // 10 - 1  # discovery may swallow the first frames
    # consecutive frames in episode order, wrapping around, pixels intact
    for i, f in enumerate(got):
        assert np.array_equal(f, frames[(k0 + i) % 4]), [int(g[0, 0, 0]) for g in got]
