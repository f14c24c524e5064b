"""``FrankaScene``: one simulated Panda on a table, for code that drives a single robot.

The simulated robot driver (and its ROS node) needs what a real Franka offers, not a vector
env: read ``q``, ``dq``, ``tau``, the EE pose and the gripper width; command joint positions or
velocities and a gripper width; advance time; render a camera. Same model as the vector env.

>>> scene = FrankaScene()
>>> scene.set_joint_targets(scene.q)
>>> scene.step(10)
>>> round(scene.time, 3)
0.05
>>> pos, quat = scene.ee_pose()
>>> pos.shape, quat.shape
((3,), (4,))
"""

from __future__ import annotations

import mujoco
import numpy as np

from sim_bridges.mujoco_franka.model import (
    GRIPPER_MAX_WIDTH,
    HOME_QPOS,
    FrankaModel,
    ObjectSpec,
    SceneOptions,
    compile_scene,
)
from sim_bridges.mujoco_franka.render import CameraRig, camera_id


class FrankaScene:
    """A Panda (position-controlled, gravity-compensated) with optional objects on a table.

    Joint commands are position targets tracked by the simulated joint controller inside
    ``mj_step``; a velocity command moves the target by ``dq * dt`` every physics step.
    """

    def __init__(
        self,
        objects: tuple[ObjectSpec, ...] = (),
        timestep: float = 0.005,
        markers: tuple[str, ...] = (),
    ) -> None:
        self.fm: FrankaModel = compile_scene(
            SceneOptions(objects=objects, markers=markers, timestep=timestep)
        )
        self.model = self.fm.model
        self.data = mujoco.MjData(self.model)
        self._vel_cmd: np.ndarray | None = None
        self._rigs: dict[tuple[int, int, str], CameraRig] = {}
        self.reset()

    # ------------------------------------------------------------ state
    def reset(self, q: np.ndarray | None = None) -> None:
        """Back to ``q`` (default: home pose) at rest, gripper open."""
        mujoco.mj_resetData(self.model, self.data)
        q = HOME_QPOS if q is None else np.asarray(q, dtype=np.float64)
        self.data.qpos[self.fm.arm_qpos] = q
        self.data.ctrl[self.fm.arm_act] = q
        self.set_gripper(GRIPPER_MAX_WIDTH)
        self.data.qpos[self.fm.grip_qpos] = self.data.ctrl[self.fm.grip_act]
        self._vel_cmd = None
        mujoco.mj_forward(self.model, self.data)

    @property
    def time(self) -> float:
        return float(self.data.time)

    @property
    def dt(self) -> float:
        return float(self.model.opt.timestep)

    @property
    def q(self) -> np.ndarray:
        return self.data.qpos[self.fm.arm_qpos].copy()

    @property
    def dq(self) -> np.ndarray:
        return self.data.qvel[self.fm.arm_dof].copy()

    @property
    def tau(self) -> np.ndarray:
        """Joint torques (Nm) the motors apply, gravity compensation included (like ``tau_J``)."""
        act = self.data.actuator_force[self.fm.arm_act]
        return act + self.data.qfrc_gravcomp[self.fm.arm_dof]

    @property
    def joint_limits(self) -> tuple[np.ndarray, np.ndarray]:
        return self.fm.arm_lower.copy(), self.fm.arm_upper.copy()

    @property
    def gripper_width(self) -> float:
        return float(self.data.qpos[self.fm.grip_qpos[0]] - self.data.qpos[self.fm.grip_qpos[1]])

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """EE (grip site) position (m) and orientation quaternion (w, x, y, z), world frame."""
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, self.data.site_xmat[self.fm.ee_site])
        return self.data.site_xpos[self.fm.ee_site].copy(), quat

    def ee_matrix(self) -> np.ndarray:
        """EE pose as a 4x4 homogeneous matrix (row-major; transpose for libfranka's O_T_EE)."""
        pos, _ = self.ee_pose()
        out = np.eye(4)
        out[:3, :3] = self.data.site_xmat[self.fm.ee_site].reshape(3, 3)
        out[:3, 3] = pos
        return out

    # ---------------------------------------------------------- commands
    def set_joint_targets(self, q: np.ndarray) -> None:
        """Joint position command (rad), clipped to the joint limits; cancels a velocity command."""
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (7,):
            raise ValueError(f"set_joint_targets expects 7 joint positions, got shape {q.shape}")
        self._vel_cmd = None
        self.data.ctrl[self.fm.arm_act] = np.clip(q, self.fm.arm_lower, self.fm.arm_upper)

    def set_joint_velocities(self, dq: np.ndarray) -> None:
        """Joint velocity command (rad/s), held until the next command."""
        dq = np.asarray(dq, dtype=np.float64)
        if dq.shape != (7,):
            raise ValueError(f"set_joint_velocities expects 7 velocities, got shape {dq.shape}")
        self._vel_cmd = dq.copy()

    def set_gripper(self, width: float) -> None:
        """Gripper opening (m), 0 .. 0.08; each finger moves half of it."""
        half = float(np.clip(width, 0.0, GRIPPER_MAX_WIDTH)) / 2.0
        self.data.ctrl[self.fm.grip_act] = [half, -half]

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps (``n * dt`` seconds)."""
        if self._vel_cmd is None:
            mujoco.mj_step(self.model, self.data, nstep=n)
        else:
            for _ in range(n):
                tgt = self.data.ctrl[self.fm.arm_act] + self._vel_cmd * self.dt
                self.data.ctrl[self.fm.arm_act] = np.clip(tgt, self.fm.arm_lower, self.fm.arm_upper)
                mujoco.mj_step(self.model, self.data)
        mujoco.mj_kinematics(self.model, self.data)

    # ------------------------------------------------------------ camera
    def render(
        self, camera: str = "third", height: int = 128, width: int = 128, robot_look: str = "visual"
    ) -> np.ndarray:
        """uint8 ``[H, W, 3]`` image of ``camera`` (``third``, ``wrist`` or ``robotview``)."""
        camera_id(self.fm, camera)
        rig = self._rigs.get((height, width, robot_look))
        if rig is None:
            rig = self._rigs[(height, width, robot_look)] = CameraRig(height, width, robot_look)
        return rig.render([self.fm], [self.data], camera)[0]

    def close(self) -> None:
        for rig in self._rigs.values():
            rig.close()
        self._rigs.clear()
