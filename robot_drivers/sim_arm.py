"""Simulated arm backends.

- :class:`MujocoArmBackend`: the MuJoCo Panda of ``sim_bridges.mujoco_franka`` (same meshes,
  position actuators, gravity compensation), stepped in real time: every
  :meth:`~MujocoArmBackend.advance` call runs as many physics steps as wall-clock time
  passed since the last one, so a driver ticking at 100 Hz sees a robot moving at real speed.
  Its servo gets the joint goal as the simulator's control law gives it, except on a physics
  step that would leave the joint limits: that step is undone and run on a
  :class:`~robot_drivers.motion.ReferenceShaper` (velocity and acceleration limited, braking
  before the position limits) -- handed an extreme target directly, the stiff, torque-limited
  servo overshot the joint speed and position limits (:meth:`MujocoArmBackend.step`).
  ``ee_impedance`` (:meth:`~MujocoArmBackend.command_impedance_target`): the arm actuators
  become torque motors while the Cartesian impedance law of :mod:`robot_drivers.impedance_law`
  runs on every physics step, as libfranka's torque loop runs it every millisecond (gravity
  stays compensated by the scene, as by Franka's firmware; Coriolis is not added). A scene
  whose ``compensates_bias`` is true (a twin of a simulator task learnt with ``ee_impedance``)
  gets the simulator's compensation instead: MuJoCo's whole bias force on the arm and fingers
  (gravity of every body the hand carries, Coriolis), so its torque-loop physics are the
  simulator's. A joint command or ``hold()`` restores the position servos, holding where the
  arm is.
- :class:`KinematicArmBackend`: an ideal velocity-limited servo in numpy (no physics, no
  MuJoCo). Why keep it: safety / driver / ROS-conversion tests and dry runs of a node graph
  need an arm that behaves predictably and starts in microseconds. It reports the grip site as
  the other backends do (:func:`robot_drivers.kinematics.grip_site_fk`), so a policy or task
  checked on it sees the frame it was trained in.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np

from rlinf_contracts.impedance import FRANKA_TAU_MAX, ImpedanceGains
from rlinf_contracts.rotations import matrix_to_quat_xyzw
from robot_drivers.arm import ArmBackend
from robot_drivers.impedance_law import CartesianImpedanceLaw
from robot_drivers.kinematics import grip_site_fk
from robot_drivers.motion import ReferenceShaper, stopping_speed
from robot_drivers.torque_control import TorqueInput, limit_torques
from robot_drivers.types import (
    PANDA_DQ_MAX,
    PANDA_GRIPPER_MAX_WIDTH,
    PANDA_HOME,
    ArmState,
    EEPose,
    GripperState,
    RobotMode,
)

log = logging.getLogger(__name__)


class KinematicArmBackend(ArmBackend):
    """Joints move straight to their target at up to ``dq_max``; gripper at ``gripper_speed``."""

    def __init__(
        self,
        home: tuple[float, ...] = PANDA_HOME,
        dq_max: tuple[float, ...] = PANDA_DQ_MAX,
        gripper_speed: float = 0.1,
    ) -> None:
        self.q = np.asarray(home, dtype=np.float64).copy()
        self.dq = np.zeros(7)
        self.target = self.q.copy()
        self.velocity: np.ndarray | None = None
        self.dq_max = np.asarray(dq_max)
        self.width = PANDA_GRIPPER_MAX_WIDTH
        self.width_target = self.width
        self.gripper_speed = gripper_speed
        self.mode = RobotMode.IDLE
        self.errors: tuple[str, ...] = ()
        self._t: float | None = None

    def read_state(self) -> ArmState:
        T = grip_site_fk(self.q)
        return ArmState(
            q=self.q.copy(),
            dq=self.dq.copy(),
            tau_j=np.zeros(7),
            ee_pose=EEPose(T[:3, 3].copy(), matrix_to_quat_xyzw(T[:3, :3])),
            gripper=GripperState(width=self.width),
            mode=self.mode,
            errors=self.errors,
            stamp=time.monotonic(),
        )

    def command_joint_positions(self, q: np.ndarray) -> None:
        self.target, self.velocity = np.asarray(q, dtype=np.float64).copy(), None
        self.mode = RobotMode.MOVE

    def reset_pose(self, q: np.ndarray, gripper_width: float) -> None:
        """Episode reset of a simulated arm: at rest at ``q``, gripper at ``gripper_width``."""
        self.q = np.asarray(q, dtype=np.float64).copy()
        self.target, self.velocity, self.dq = self.q.copy(), None, np.zeros(7)
        self.width = self.width_target = float(np.clip(gripper_width, 0.0, PANDA_GRIPPER_MAX_WIDTH))

    def command_joint_velocities(self, dq: np.ndarray) -> None:
        self.velocity = np.asarray(dq, dtype=np.float64).copy()
        self.mode = RobotMode.MOVE

    def hold(self) -> None:
        self.target, self.velocity = self.q.copy(), None

    def gripper_move(self, width: float, speed: float) -> bool:
        self.width_target = width
        return True

    def gripper_grasp(
        self, width: float, speed: float, force: float, epsilon_inner: float, epsilon_outer: float
    ) -> bool:
        self.width_target = width
        return True

    def gripper_homing(self) -> bool:
        self.width_target = PANDA_GRIPPER_MAX_WIDTH
        return True

    def recover(self) -> bool:
        self.errors, self.mode = (), RobotMode.IDLE
        return True

    def inject_error(self, error: str = "joint_position_limits_violation") -> None:
        """Put the arm in REFLEX as libfranka does after a violated limit (tests, drills)."""
        self.errors, self.mode = (error,), RobotMode.REFLEX
        self.hold()

    def advance(self, now: float) -> None:
        dt = 0.0 if self._t is None else max(0.0, now - self._t)
        self._t = now
        if dt == 0.0:
            return
        if self.velocity is not None:
            self.target = self.q + self.velocity * dt
        step = np.clip(self.target - self.q, -self.dq_max * dt, self.dq_max * dt)
        self.q = self.q + step
        self.dq = step / dt
        dw = np.clip(
            self.width_target - self.width, -self.gripper_speed * dt, self.gripper_speed * dt
        )
        self.width += dw


class MujocoArmBackend(ArmBackend):
    """The sim_bridges MuJoCo Panda advancing in real time; can also render its cameras."""

    def __init__(
        self,
        home: tuple[float, ...] | None = None,
        max_substeps: int = 100,
        realtime: bool = True,
        scene: Any = None,
        speed_fraction: float = 0.9,
        torque_fraction: float = 0.5,
    ) -> None:
        self.home = home
        # the servo reference's speed limit as a fraction of dq_max: the headroom the tracking
        # servo needs to stay under the datasheet limit (measured peak: see the safety tests)
        self.speed_fraction = speed_fraction
        self.torque_fraction = torque_fraction
        self._shaper: ReferenceShaper | None = None
        self._goal: np.ndarray | None = None
        # a twin's world (e.g. sim_bridges.mujoco_franka.twin.LanguageSceneTwin, or a factory of
        # one): its fm / data are adopted, so objects, colours and success are the simulator's
        self.scene: Any = scene
        self.max_substeps = max_substeps
        self.realtime = realtime
        self._lock = threading.RLock()
        self._renderers: dict[tuple[int, int], Any] = {}
        self._camera_option: Any = None
        self._sim_wall: float | None = None
        self._velocity: np.ndarray | None = None
        # the compiled scene and its MjData, set by connect() (MuJoCo's types are opaque: Any)
        self.fm: Any = None
        self.data: Any = None
        self.errors: tuple[str, ...] = ()
        self.mode = RobotMode.IDLE
        self.dropped_time_s = 0.0
        # lock-step twin (robot.scene.lockstep): physics advances only in step_control, one
        # control period per command, never with wall time
        self.lockstep = False
        # ee_impedance: the law run on every physics step (None: position servos), its last
        # torque, and the position actuators' parameters to restore on hand-back
        self._impedance: CartesianImpedanceLaw | None = None
        self._tau = np.zeros(7)
        self._servo_prm: tuple[np.ndarray, np.ndarray] | None = None
        # dofs given the simulator's bias compensation under the law (scene.compensates_bias)
        self._bias_dofs: np.ndarray | None = None

    def connect(self) -> None:
        import mujoco

        from sim_bridges.mujoco_franka.model import HOME_QPOS, compile_scene
        from sim_bridges.mujoco_franka.render import camera_option

        self._mj = mujoco
        self._camera_option = camera_option("visual")  # no visualisation sites, as a camera
        if callable(self.scene):
            self.scene = self.scene()
        if self.scene is not None:
            self.fm, self.data = self.scene.fm, self.scene.data
        else:
            self.fm = compile_scene()
            self.data = mujoco.MjData(self.fm.model)
        q0 = np.asarray(self.home if self.home is not None else HOME_QPOS, dtype=np.float64)
        self.data.qpos[self.fm.arm_qpos] = q0
        self.data.ctrl[self.fm.arm_act] = q0
        self._shaper = ReferenceShaper(q0, speed_fraction=self.speed_fraction)
        m = self.fm.model
        self._tau_max = np.abs(m.actuator_forcerange[self.fm.arm_act]).min(axis=1)
        self._M = np.zeros((m.nv, m.nv))
        self._dq_guard = self.speed_fraction * np.asarray(PANDA_DQ_MAX)
        self._state_spec = mujoco.mjtState.mjSTATE_INTEGRATION
        self._snapshot = np.empty(mujoco.mj_stateSize(m, self._state_spec))
        self.limited_steps = 0  # physics steps the shaped reference ran instead of the goal
        self._goal = q0.copy()
        self._set_gripper_ctrl(PANDA_GRIPPER_MAX_WIDTH)
        self.data.qpos[self.fm.grip_qpos] = [
            PANDA_GRIPPER_MAX_WIDTH / 2,
            -PANDA_GRIPPER_MAX_WIDTH / 2,
        ]
        mujoco.mj_forward(self.fm.model, self.data)
        self._base = mujoco.mj_name2id(self.fm.model, mujoco.mjtObj.mjOBJ_BODY, "base")
        if getattr(self.scene, "compensates_bias", False):
            from sim_bridges.mujoco_franka.torque_loop import compensated_dofs

            self._bias_dofs = compensated_dofs(self.fm)
        log.info("MuJoCo Panda ready (timestep %.3f s)", self.fm.model.opt.timestep)

    def disconnect(self) -> None:
        with self._lock:
            for r in self._renderers.values():
                r.close()
            self._renderers.clear()

    @property
    def _shaped(self) -> ReferenceShaper:
        """The servo reference shaper, which connect() makes (stepping before it is a bug)."""
        if self._shaper is None:
            raise RuntimeError("MujocoArmBackend: call connect() first")
        return self._shaper

    def _set_gripper_ctrl(self, width: float) -> None:
        half = float(np.clip(width, 0.0, PANDA_GRIPPER_MAX_WIDTH)) / 2
        self.data.ctrl[self.fm.grip_act] = [half, -half]

    def read_state(self) -> ArmState:
        with self._lock:
            fm, d = self.fm, self.data
            R_base = d.xmat[self._base].reshape(3, 3)
            p = R_base.T @ (d.site_xpos[fm.ee_site] - d.xpos[self._base])
            R = R_base.T @ d.site_xmat[fm.ee_site].reshape(3, 3)
            g = d.qpos[fm.grip_qpos]
            return ArmState(
                q=d.qpos[fm.arm_qpos].copy(),
                dq=d.qvel[fm.arm_dof].copy(),
                tau_j=d.actuator_force[fm.arm_act].copy(),
                ee_pose=EEPose(p, matrix_to_quat_xyzw(R)),
                gripper=GripperState(width=float(g[0] - g[1])),
                mode=self.mode,
                errors=self.errors,
                stamp=time.monotonic(),
            )

    def command_joint_positions(self, q: np.ndarray) -> None:
        with self._lock:
            if self._impedance is not None:
                self._sync_reference()
            self._velocity = None
            self._goal = np.asarray(q, dtype=np.float64).copy()
            if self.lockstep:  # the simulator's own step: the target goes to the actuators at once
                self.data.ctrl[self.fm.arm_act] = q
            self.mode = RobotMode.MOVE

    def command_joint_velocities(self, dq: np.ndarray) -> None:
        with self._lock:
            if self._impedance is not None:
                self._sync_reference()
            self._velocity = np.asarray(dq, dtype=np.float64).copy()
            self.mode = RobotMode.MOVE

    def hold(self) -> None:
        with self._lock:
            self._sync_reference()

    @property
    def control_mode(self) -> str:
        """``torque`` while the impedance law drives the arm, else ``position``."""
        return "torque" if self._impedance is not None else "position"

    def command_impedance_target(
        self, pose: np.ndarray, gains: ImpedanceGains, home: np.ndarray
    ) -> None:
        """Track ``pose`` (4x4, base frame) with the impedance law on every physics step."""
        with self._lock:
            self._velocity = None
            self.mode = RobotMode.MOVE
            if self._impedance is not None and self._impedance.gains == gains:
                self._impedance.set_target(pose)
                return
            self._impedance = CartesianImpedanceLaw(gains, home, pose)
            self._tau = np.zeros(7)  # ramps up from zero under the rate limit, as on the robot
            m, act = self.fm.model, self.fm.arm_act
            if self._servo_prm is None:
                self._servo_prm = (m.actuator_gainprm[act].copy(), m.actuator_biasprm[act].copy())
            m.actuator_gainprm[act] = 0.0
            m.actuator_gainprm[act, 0] = 1.0  # a motor: ctrl is the joint torque (Nm)
            m.actuator_biasprm[act] = 0.0
            self.data.ctrl[act] = 0.0

    def _end_impedance(self) -> None:
        """Position servos again (their gains restored); the caller sets their target."""
        if self._servo_prm is not None:
            m, act = self.fm.model, self.fm.arm_act
            m.actuator_gainprm[act], m.actuator_biasprm[act] = self._servo_prm
            self._servo_prm = None
        if self._bias_dofs is not None:
            self.data.qfrc_applied[self._bias_dofs] = 0.0
        self._impedance = None

    def _impedance_step(self, law: CartesianImpedanceLaw) -> None:
        """One physics step under the law: kinematics of the present state (``mj_step1``), the
        law in the base frame, torques limited as the libfranka backend limits them, then
        ``mj_step2``."""
        mj, m, d, fm = self._mj, self.fm.model, self.data, self.fm
        mj.mj_step1(m, d)
        if self._bias_dofs is not None:  # the simulator's torque loop: the whole bias force,
            # less the body gravity compensation the position scene already applies
            dofs = self._bias_dofs
            d.qfrc_applied[dofs] = d.qfrc_bias[dofs] - d.qfrc_gravcomp[dofs]
        R_base = d.xmat[self._base].reshape(3, 3)
        o_t_ee = np.eye(4)
        o_t_ee[:3, 3] = R_base.T @ (d.site_xpos[fm.ee_site] - d.xpos[self._base])
        o_t_ee[:3, :3] = R_base.T @ d.site_xmat[fm.ee_site].reshape(3, 3)
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mj.mj_jacSite(m, d, jacp, jacr, fm.ee_site)
        jac = np.vstack([R_base.T @ jacp[:, fm.arm_dof], R_base.T @ jacr[:, fm.arm_dof]])
        mj.mj_fullM(m, self._M, d.qM)
        ts = float(m.opt.timestep)
        inp = TorqueInput(
            q=d.qpos[fm.arm_qpos].copy(),
            dq=d.qvel[fm.arm_dof].copy(),
            o_t_ee=o_t_ee,
            jacobian=jac,
            mass=self._M[np.ix_(fm.arm_dof, fm.arm_dof)].copy(),
            tau_prev=self._tau.copy(),
            dt=ts,
        )
        self._tau = limit_torques(law(inp), self._tau, dt=ts, tau_max=FRANKA_TAU_MAX)
        d.ctrl[fm.arm_act] = self._tau
        mj.mj_step2(m, d)
        self._shaped.follow(d.qpos[fm.arm_qpos], d.qvel[fm.arm_dof])

    def gripper_move(self, width: float, speed: float) -> bool:
        with self._lock:
            self._set_gripper_ctrl(width)
        return True

    def gripper_grasp(
        self, width: float, speed: float, force: float, epsilon_inner: float, epsilon_outer: float
    ) -> bool:
        return self.gripper_move(width, speed)

    def gripper_homing(self) -> bool:
        return self.gripper_move(PANDA_GRIPPER_MAX_WIDTH, 0.1)

    def recover(self) -> bool:
        self.errors, self.mode = (), RobotMode.IDLE
        return True

    def _sync_reference(self) -> None:
        """Stop where the arm is: servo target, shaped reference and goal on the measured joints
        (hold, e-stop, a pose set from outside); ends an impedance loop."""
        self._end_impedance()
        q = self.data.qpos[self.fm.arm_qpos].copy()
        self._velocity = None
        self._goal = q.copy()
        self.data.ctrl[self.fm.arm_act] = q
        if self._shaper is not None:
            self._shaper.reset(q)

    def _feasible_acceleration(self) -> np.ndarray:
        """The shaper's acceleration limits scaled so that, in the present pose, accelerating all
        joints at once needs at most ``torque_fraction`` of each actuator's torque (|M| a <= f tau).
        Why: a saturated servo falls behind its reference, then overshoots it to catch up; the
        inertia coupling matters (the hand's joint 7 is parallel to joint 1 in the home pose)."""
        m, d = self.fm.model, self.data
        self._mj.mj_fullM(m, self._M, d.qM)
        M = np.abs(self._M[np.ix_(self.fm.arm_dof, self.fm.arm_dof)])
        need = M @ self._shaped.a_max
        return self._shaped.a_max * min(
            1.0, float(np.min(self.torque_fraction * self._tau_max / need))
        )

    def _can_still_stop(self, q: np.ndarray, dq: np.ndarray, dt: float) -> bool:
        """Whether the joints ``q`` at speeds ``dq`` are under ``speed_fraction`` of their speed
        limit, inside the position limits (less the shaper's margin), and slow enough to stop
        before them at the acceleration the shaper may use here."""
        lo, hi = self._shaped.lo, self._shaped.hi
        if np.any(np.abs(dq) > self._dq_guard) or np.any(q < lo) or np.any(q > hi):
            return False
        a = self._feasible_acceleration()
        return bool(
            np.all(dq <= stopping_speed(hi - q, a, dt))
            and np.all(-dq <= stopping_speed(q - lo, a, dt))
        )

    def step(self, n: int) -> None:
        """Advance exactly ``n`` physics steps.

        A joint goal goes to the servo as it is -- the simulator's own control law, so a policy
        trained there sees the arm it trained on -- unless that physics step would take a joint
        over ``speed_fraction`` of its speed limit or past its position limits: then the step is
        undone (the integration state restored; the replay is bitwise) and run with the shaped
        reference instead (also when a joint would be too fast to stop before a position limit
        at the shaper's acceleration: :meth:`_can_still_stop`), which accelerates within what the
        actuators' torque allows and brakes before the limits. Why not shape every step: measured on
        the reach twin, the shaped reference (each joint's acceleration scaled by the weakest wrist
        actuator) made the arm so much slower than the simulator's that a checkpoint reaching 20 of
        20 goals in the simulator reached 10-14 on the twin. Velocity commands always follow the
        shaped reference.
        """
        with self._lock:
            m, d, ts = self.fm.model, self.data, self.fm.model.opt.timestep
            fm = self.fm
            for _ in range(max(int(n), 1)):
                if self._impedance is not None:
                    self._impedance_step(self._impedance)
                    continue
                if self._velocity is None:
                    self._mj.mj_getState(m, d, self._snapshot, self._state_spec)
                    d.ctrl[fm.arm_act] = self._goal
                    self._mj.mj_step(m, d)
                    q, dq = d.qpos[fm.arm_qpos], d.qvel[fm.arm_dof]
                    if self._can_still_stop(q, dq, ts):
                        self._shaped.follow(q, dq)  # ready to take over from the measured state
                        continue
                    self._mj.mj_setState(m, d, self._snapshot, self._state_spec)
                    self.limited_steps += 1
                a = self._feasible_acceleration()
                if self._velocity is not None:
                    ref = self._shaped.step(ts, velocity=self._velocity, ddq_max=a)
                else:
                    ref = self._shaped.step(ts, goal=self._goal, ddq_max=a)
                d.ctrl[fm.arm_act] = ref
                self._mj.mj_step(m, d)

    def step_control(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """One control period of ``n`` physics steps exactly as the simulator's env step runs it
        (``FrankaVectorEnv._apply``): ``mj_step2`` (the position stage was done by the previous
        call or the reset's ``mj_forward``), ``n - 1`` full steps, then ``mj_step1`` so the
        kinematics read afterwards (EE pose, camera) are those of the new joints. Why not
        ``mj_step(n)``: it leaves ``site_xpos`` one physics step behind ``qpos``. Returns the
        arm's joint positions and speeds after each physics step (``[n, 7]`` each), where the
        lock-step twin checks the limits (stepping one by one is bitwise ``nstep``)."""
        with self._lock:
            self._velocity = None
            m, d, fm = self.fm.model, self.data, self.fm
            n = max(int(n), 1)
            q, dq = np.empty((n, len(PANDA_DQ_MAX))), np.empty((n, len(PANDA_DQ_MAX)))
            self._mj.mj_step2(m, d)
            q[0], dq[0] = d.qpos[fm.arm_qpos], d.qvel[fm.arm_dof]
            for k in range(1, n):
                self._mj.mj_step(m, d)
                q[k], dq[k] = d.qpos[fm.arm_qpos], d.qvel[fm.arm_dof]
            self._mj.mj_step1(m, d)
            return q, dq

    def advance(self, now: float) -> None:
        """Step physics to wall time ``now``; a backlog over ``max_substeps`` is dropped (and
        counted). A lock-step twin's physics does not follow wall time (:meth:`step_control`)."""
        if self.lockstep:
            return
        if self._sim_wall is None or not self.realtime:
            self._sim_wall = now
            if not self.realtime:
                self.step(1)
            return
        ts = self.fm.model.opt.timestep
        n = int((now - self._sim_wall) / ts)
        if n <= 0:
            return
        if n > self.max_substeps:
            self.dropped_time_s += (n - self.max_substeps) * ts
            self._sim_wall = now - self.max_substeps * ts
            n = self.max_substeps
        self.step(n)
        self._sim_wall += n * ts

    def set_arm_pose(self, q: np.ndarray, gripper_width: float | None = None) -> None:
        """Kinematic mirror (camera twins): put the arm at ``q`` without dynamics."""
        with self._lock:
            self.data.qpos[self.fm.arm_qpos] = q
            if gripper_width is not None:
                half = gripper_width / 2
                self.data.qpos[self.fm.grip_qpos] = [half, -half]
            self._mj.mj_forward(self.fm.model, self.data)
            self._sync_reference()

    def reset_pose(self, q: np.ndarray, gripper_width: float) -> None:
        """Episode reset of the simulated twin: put the arm at rest at ``q`` with that target and
        the gripper at ``gripper_width``, as the simulator's own reset does (no homing motion,
        so a bad episode cannot leave the next one stuck behind the workspace box)."""
        with self._lock:
            q = np.asarray(q, dtype=np.float64)
            self.data.qvel[:] = 0.0
            self.data.qpos[self.fm.arm_qpos] = q
            half = float(np.clip(gripper_width, 0.0, PANDA_GRIPPER_MAX_WIDTH)) / 2
            self.data.qpos[self.fm.grip_qpos] = [half, -half]
            self._set_gripper_ctrl(2 * half)
            self._mj.mj_forward(self.fm.model, self.data)
            self._sync_reference()

    def new_episode(self, number: int | None = None) -> None:
        """A twin with a scene: the simulator's episode reset (arm, objects, colours,
        instruction)."""
        if self.scene is None:
            raise ValueError("this simulated arm has no scene with episodes (set the arm's scene)")
        with self._lock:
            self._velocity = None
            self._end_impedance()
            self.scene.new_episode(number)  # sets the simulator's own actuator targets
            q = self.data.qpos[self.fm.arm_qpos].copy()
            self._goal = q.copy()
            self._shaped.reset(q)

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        """uint8 [H, W, 3] from a scene camera (``third``, ``wrist``...)."""
        with self._lock:
            if self.scene is not None and hasattr(self.scene, "render"):
                return self.scene.render(
                    camera
                )  # the env's own renderer: episode colours, its size
            cam = self.fm.camera_ids.get(camera)
            if cam is None or cam < 0:
                raise ValueError(
                    f"unknown sim camera {camera!r}; known: {sorted(self.fm.camera_ids)}"
                )
            r = self._renderers.get((height, width))
            if r is None:
                r = self._renderers[(height, width)] = self._mj.Renderer(
                    self.fm.model, height, width
                )
            r.update_scene(self.data, camera=cam, scene_option=self._camera_option)
            return r.render().copy()
