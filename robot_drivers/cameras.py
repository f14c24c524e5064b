"""Cameras: one small interface, real backends (RealSense, ZED) import-guarded, and a sim twin.

Why a twin that *mirrors* joints: in a multi-process graph the camera runs in its own process,
apart from the simulated robot; the sim camera keeps its own copy of the MuJoCo scene and
puts the arm where the robot reports it (``set_arm_pose``) before each render, so images show
the real simulated motion without sharing memory.

Frames are RGB uint8 ``[H, W, 3]``; depth (when enabled) is uint16 millimetres ``[H, W]``.
"""

from __future__ import annotations

import abc
import importlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


class CameraError(RuntimeError):
    """A camera could not be opened or read; the message names the camera and the fix."""


@dataclass(frozen=True)
class CameraIntrinsics:
    """Pinhole intrinsics (pixels) and plumb-bob distortion, as CameraInfo carries them."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)

    @staticmethod
    def from_fovy(width: int, height: int, fovy_deg: float) -> CameraIntrinsics:
        f = 0.5 * height / math.tan(math.radians(fovy_deg) / 2)
        return CameraIntrinsics(width, height, f, f, (width - 1) / 2, (height - 1) / 2)

    def k(self) -> np.ndarray:
        return np.array([[self.fx, 0, self.cx], [0, self.fy, self.cy], [0, 0, 1.0]])


@dataclass
class CameraFrame:
    color: np.ndarray  # uint8 [H, W, 3] RGB
    stamp: float  # time.time() of capture
    depth: np.ndarray | None = None  # uint16 [H, W] millimetres


@dataclass
class CameraConfig:
    """One camera, real or simulated."""

    name: str = field(
        default="camera", metadata={"help": "camera name (key in observation images)"}
    )
    backend: str = field(default="sim", metadata={"help": "sim | realsense | zed | recorded"})
    width: int = 224
    height: int = 224
    fps: float = 30.0
    serial: str = field(
        default="", metadata={"help": "device serial (real cameras); empty = first found"}
    )
    sim_camera: str = field(default="third", metadata={"help": "MuJoCo camera of the sim scene"})
    depth: bool = False
    recording: str = field(
        default="",
        metadata={
            "help": "recorded: frames to replay in a loop (.npy [N,H,W,3], .npz, or an episode "
            "store directory)"
        },
    )


class Camera(abc.ABC):
    def __init__(self, cfg: CameraConfig) -> None:
        self.cfg = cfg

    def connect(self) -> None: ...  # noqa: B027 -- optional hook: a no-op unless a camera needs it

    def disconnect(self) -> None: ...  # noqa: B027 -- optional hook, as connect

    @abc.abstractmethod
    def read(self) -> CameraFrame: ...

    @property
    @abc.abstractmethod
    def intrinsics(self) -> CameraIntrinsics: ...


def _require(module: str, backend: str, hint: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise CameraError(
            f"camera backend {backend!r} needs `{module}` ({hint}); "
            "use backend 'sim' on a machine without the camera"
        ) from e


class RealSenseCamera(Camera):
    """Intel RealSense over pyrealsense2: RGB (and depth aligned to color)."""

    def connect(self) -> None:
        rs = self._rs = _require("pyrealsense2", "realsense", "pip install pyrealsense2")
        self.pipeline = rs.pipeline()
        conf = rs.config()
        if self.cfg.serial:
            conf.enable_device(self.cfg.serial)
        conf.enable_stream(
            rs.stream.color, self.cfg.width, self.cfg.height, rs.format.rgb8, int(self.cfg.fps)
        )
        if self.cfg.depth:
            conf.enable_stream(
                rs.stream.depth, self.cfg.width, self.cfg.height, rs.format.z16, int(self.cfg.fps)
            )
            self._align = rs.align(rs.stream.color)
        profile = self.pipeline.start(conf)
        i = profile.get_stream(rs.stream.color).as_video_stream_profile().get_intrinsics()
        self._intr = CameraIntrinsics(i.width, i.height, i.fx, i.fy, i.ppx, i.ppy, tuple(i.coeffs))

    def read(self) -> CameraFrame:
        frames = self.pipeline.wait_for_frames()
        if self.cfg.depth:
            frames = self._align.process(frames)
        color = np.asanyarray(frames.get_color_frame().get_data()).copy()
        depth = (
            np.asanyarray(frames.get_depth_frame().get_data()).copy() if self.cfg.depth else None
        )
        return CameraFrame(color=color, depth=depth, stamp=time.time())

    @property
    def intrinsics(self) -> CameraIntrinsics:
        return self._intr

    def disconnect(self) -> None:
        self.pipeline.stop()


class ZedCamera(Camera):
    """Stereolabs ZED over pyzed (left rectified view)."""

    def connect(self) -> None:
        sl = self._sl = _require("pyzed.sl", "zed", "install the ZED SDK and its Python API")
        self.zed = sl.Camera()
        init = sl.InitParameters()
        init.camera_fps = int(self.cfg.fps)
        init.depth_mode = sl.DEPTH_MODE.NEURAL if self.cfg.depth else sl.DEPTH_MODE.NONE
        init.coordinate_units = sl.UNIT.MILLIMETER
        if self.cfg.serial:
            init.set_from_serial_number(int(self.cfg.serial))
        err = self.zed.open(init)
        if err != sl.ERROR_CODE.SUCCESS:
            raise CameraError(f"ZED camera {self.cfg.name!r} failed to open: {err}")
        self._mat, self._dmat = sl.Mat(), sl.Mat()
        c = self.zed.get_camera_information().camera_configuration.calibration_parameters.left_cam
        self._scale = (self.cfg.width / c.image_size.width, self.cfg.height / c.image_size.height)
        self._intr = CameraIntrinsics(
            self.cfg.width,
            self.cfg.height,
            c.fx * self._scale[0],
            c.fy * self._scale[1],
            c.cx * self._scale[0],
            c.cy * self._scale[1],
            tuple(c.disto[:5]),
        )

    def read(self) -> CameraFrame:
        sl = self._sl
        if self.zed.grab() != sl.ERROR_CODE.SUCCESS:
            raise CameraError(f"ZED camera {self.cfg.name!r}: grab failed")
        size = sl.Resolution(self.cfg.width, self.cfg.height)
        self.zed.retrieve_image(self._mat, sl.VIEW.LEFT, sl.MEM.CPU, size)
        bgra = self._mat.get_data()
        depth = None
        if self.cfg.depth:
            self.zed.retrieve_measure(self._dmat, sl.MEASURE.DEPTH, sl.MEM.CPU, size)
            depth = np.nan_to_num(self._dmat.get_data()).clip(0, 65535).astype(np.uint16)
        return CameraFrame(
            color=np.ascontiguousarray(bgra[..., 2::-1]), depth=depth, stamp=time.time()
        )

    @property
    def intrinsics(self) -> CameraIntrinsics:
        return self._intr

    def disconnect(self) -> None:
        self.zed.close()


class SimCamera(Camera):
    """Renders a camera of the MuJoCo Panda scene; ``pose_source`` supplies the arm pose to
    mirror."""

    def __init__(
        self,
        cfg: CameraConfig,
        scene: Any = None,
        pose_source: Callable[[], tuple[np.ndarray, float | None] | None] | None = None,
    ) -> None:
        super().__init__(cfg)
        self.scene = scene
        self.pose_source = pose_source
        self._own_scene = False

    def connect(self) -> None:
        self._own_scene = self.scene is None
        if self._own_scene:
            from robot_drivers.sim_arm import MujocoArmBackend

            self.scene = MujocoArmBackend(realtime=False)
            self.scene.connect()
        cam = self.scene.fm.camera_ids.get(self.cfg.sim_camera, -1)
        if cam < 0:
            raise CameraError(
                f"sim camera {self.cfg.name!r}: scene has no camera {self.cfg.sim_camera!r}; "
                f"known: {sorted(self.scene.fm.camera_ids)}"
            )
        fovy = float(self.scene.fm.model.cam_fovy[cam])
        self._intr = CameraIntrinsics.from_fovy(self.cfg.width, self.cfg.height, fovy)

    def read(self) -> CameraFrame:
        pose = self.pose_source() if self.pose_source is not None else None
        if pose is not None:
            self.scene.set_arm_pose(*pose)
        color = self.scene.render(self.cfg.sim_camera, self.cfg.height, self.cfg.width)
        return CameraFrame(color=color, stamp=time.time())

    @property
    def intrinsics(self) -> CameraIntrinsics:
        return self._intr

    def disconnect(self) -> None:
        """Free the renderers of a scene this camera made (now, not in a GC at interpreter exit);
        a shared scene belongs to whoever passed it in."""
        if self._own_scene:
            self.scene.disconnect()


class RecordedCamera(Camera):
    """Replays recorded RGB frames in a loop, stamped at read time.

    Why: a camera that costs nothing to produce, so a benchmark of the control loop measures the
    loop carrying a real image payload, not a renderer competing for the CPU (the sim camera
    renders with osmesa on the CPU). Frames come as ``frames=`` (the camera node reads an episode
    store that way) or from ``recording``: a ``.npy`` array ``[N, H, W, 3]`` uint8, or a ``.npz``
    holding ``frames``, ``images/<name>``, ``<name>`` or a single array.
    """

    def __init__(self, cfg: CameraConfig, frames: np.ndarray | None = None) -> None:
        super().__init__(cfg)
        self.frames = frames
        self.index = 0

    def connect(self) -> None:
        if self.frames is None:
            self.frames = load_frames(self.cfg.recording, self.cfg.name)
        self.frames = check_frames(self.frames, self.cfg)
        self._intr = CameraIntrinsics.from_fovy(self.cfg.width, self.cfg.height, 45.0)

    def read(self) -> CameraFrame:
        assert self.frames is not None, "RecordedCamera.read() before connect()"
        frame = self.frames[self.index % len(self.frames)]
        self.index += 1
        return CameraFrame(color=frame, stamp=time.time())

    @property
    def intrinsics(self) -> CameraIntrinsics:
        return self._intr


def load_frames(path: str, name: str) -> np.ndarray:
    """Frames of camera ``name`` from a ``.npy`` / ``.npz`` file (see :class:`RecordedCamera`)."""
    if not path:
        raise CameraError(
            f"camera {name!r}: backend 'recorded' needs camera.recording (a .npy / .npz of frames "
            "or an episode store)"
        )
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise CameraError(f"camera {name!r}: cannot read recording {path!r}: {e}") from None
    if isinstance(data, np.ndarray):
        return data
    with data:
        keys = list(data.keys())
        for key in ("frames", f"images/{name}", name):
            if key in keys:
                return data[key]
        if len(keys) == 1:
            return data[keys[0]]
    raise CameraError(
        f"camera {name!r}: recording {path!r} has arrays {keys}; name one 'frames' or "
        f"'images/{name}'"
    )


def check_frames(frames: np.ndarray, cfg: CameraConfig) -> np.ndarray:
    """``frames`` as contiguous uint8 ``[N, height, width, 3]``, or an error naming what differs."""
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0 or frames.dtype != np.uint8:
        raise CameraError(
            f"camera {cfg.name!r}: recorded frames must be uint8 [N>0, H, W, 3], got "
            f"{frames.dtype} {list(frames.shape)}"
        )
    if frames.shape[1:3] != (cfg.height, cfg.width):
        raise CameraError(
            f"camera {cfg.name!r}: recorded frames are {frames.shape[1]}x{frames.shape[2]} "
            f"(HxW), the config says camera.height={cfg.height} camera.width={cfg.width}"
        )
    return np.ascontiguousarray(frames)


CAMERA_BACKENDS: dict[str, type[Camera]] = {
    "sim": SimCamera,
    "realsense": RealSenseCamera,
    "zed": ZedCamera,
    "recorded": RecordedCamera,
}


def make_camera(cfg: CameraConfig, **kwargs: Any) -> Camera:
    """Camera for ``cfg.backend`` (kwargs go to the backend, e.g. ``scene=`` for sim)."""
    try:
        cls = CAMERA_BACKENDS[cfg.backend]
    except KeyError:
        raise CameraError(
            f"camera {cfg.name!r}: unknown backend {cfg.backend!r}; "
            f"known: {sorted(CAMERA_BACKENDS)}"
        ) from None
    return cls(cfg, **kwargs)
