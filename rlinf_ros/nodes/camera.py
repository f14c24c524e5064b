"""Camera node: ``sensor_msgs/Image`` + ``CameraInfo`` (same stamp) at the camera's fps.

realsense2_camera topic names by default. A sim camera renders its own copy of the MuJoCo
scene with the arm placed where ``joint_states`` says (see :mod:`robot_drivers.cameras`).
A ``recorded`` camera replays frames (a ``.npy`` / ``.npz`` file, or ``images/<camera.name>``
of every episode in an episode store directory) at the camera's fps: a source that costs
nothing to produce, for loop benchmarks with a real image payload. Settings are ROS parameters
too: ``--ros-args -p camera.fps:=5`` overrides the YAML (see
:func:`rlinf_ros.nodes.common.declare_config`). Frames follow the node clock: ``camera.fps`` per
simulated second under ``use_sim_time``; the capture time (``render_ms``) is wall time.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, JointState

from rlinf_ros.config import CameraNodeConfig, RosGraphConfig
from rlinf_ros.conversions import (
    ConversionError,
    camera_info_msg,
    joint_state_to_arrays,
    numpy_to_image,
)
from rlinf_ros.nodes.common import (
    declare_config,
    exit_process,
    now_s,
    reliable_qos,
    run_node,
    sensor_qos,
)
from robot_drivers.cameras import Camera, CameraError, make_camera

log = logging.getLogger(__name__)

_CONVERT = {
    "rgb8": lambda a: a,
    "bgr8": lambda a: np.ascontiguousarray(a[..., ::-1]),
    "mono8": lambda a: np.ascontiguousarray(a.mean(axis=2).astype(np.uint8)),
}


class CameraNode(Node):
    def __init__(self, cfg: CameraNodeConfig, camera: Camera | None = None) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        cfg = declare_config(self, cfg)  # every setting is a ROS parameter (`-p camera.fps:=5`)
        if cfg.encoding not in _CONVERT:
            raise ConversionError(
                f"camera {cfg.name!r}: encoding {cfg.encoding!r} not publishable; "
                f"use one of {sorted(_CONVERT)}"
            )
        self.cfg = cfg
        self._q: np.ndarray | None = None
        kwargs = {}
        if cfg.camera.backend == "sim" and cfg.mirror_joint_states:
            kwargs["pose_source"] = lambda: None if self._q is None else (self._q, None)
            names = [f"{cfg.joint_prefix}joint{i}" for i in range(1, 8)]
            self.create_subscription(
                JointState,
                cfg.mirror_joint_states,
                lambda m: self._on_joints(m, names),
                sensor_qos(),
            )
        if cfg.camera.backend == "recorded" and Path(cfg.camera.recording).is_dir():
            kwargs["frames"] = store_frames(cfg.camera.recording, cfg.camera.name)
        self.camera = camera or make_camera(cfg.camera, **kwargs)
        self.camera.connect()
        self.pub_img = self.create_publisher(Image, cfg.image_topic, reliable_qos(2))
        self.pub_info = self.create_publisher(CameraInfo, cfg.info_topic, reliable_qos(2))
        self.create_timer(1.0 / cfg.camera.fps, self._capture)
        self.frames = 0
        self.render_ms = 0.0
        log.info(
            "camera %s (%s %dx%d @ %.0f fps) -> %s",
            cfg.name,
            cfg.camera.backend,
            cfg.camera.width,
            cfg.camera.height,
            cfg.camera.fps,
            cfg.image_topic,
        )

    def _on_joints(self, msg: JointState, names: list[str]) -> None:
        try:
            self._q = joint_state_to_arrays(msg, names)[0]
        except ConversionError as e:
            log.warning("camera mirror: %s", e)

    def _capture(self) -> None:
        t0 = time.perf_counter()
        frame = self.camera.read()
        self.render_ms = 0.9 * self.render_ms + 0.1 * (time.perf_counter() - t0) * 1e3
        stamp = now_s(
            self
        )  # stamp at publication (node clock): the sim frame shows the arm as of now
        img = numpy_to_image(
            _CONVERT[self.cfg.encoding](frame.color), self.cfg.encoding, stamp, self.cfg.frame_id
        )
        self.pub_img.publish(img)
        self.pub_info.publish(camera_info_msg(self.camera.intrinsics, stamp, self.cfg.frame_id))
        self.frames += 1
        if self.frames % 100 == 0:
            log.info(
                "camera %s: %d frames, capture %.1f ms", self.cfg.name, self.frames, self.render_ms
            )

    def close(self) -> None:
        self.camera.disconnect()


def store_frames(path: str, cam: str) -> np.ndarray:
    """Every ``images/<cam>`` frame of the episode store at ``path``, in episode order."""
    from rlinf_data.store import EpisodeStore

    key = f"images/{cam}"
    frames = [ep.steps[key] for ep in EpisodeStore(path, mode="r") if len(ep) and key in ep.steps]
    if not frames:
        raise CameraError(
            f"camera {cam!r}: episode store {path} has no non-empty episode with {key!r}"
        )
    return np.concatenate(frames)


def build(cfg: RosGraphConfig, name: str | None) -> CameraNode:
    cams = [c for c in cfg.cameras if name is None or c.name == name]
    if not cams:
        raise ValueError(
            f"no camera named {name!r} in the config; cameras: {[c.name for c in cfg.cameras]}"
        )
    return CameraNode(cams[0])


def main(argv: list[str] | None = None) -> int:
    return run_node("camera", build, argv)


if __name__ == "__main__":
    exit_process(main())
