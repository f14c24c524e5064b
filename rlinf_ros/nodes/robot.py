"""Robot node: a FrankaArm (or two) on ROS 2 with franka_ros2 topic names.

Publishes ``joint_states`` (JointState), ``franka_gripper/joint_states`` (finger joints at half
the width), the end-effector ``current_pose`` (PoseStamped) and ``robot_state`` (std_msgs/String
JSON: mode, errors, e-stop, safety counters). Accepts ``JointTrajectory`` (arm joints, and the
gripper through ``<prefix>finger_joint1``) and ``PoseStamped`` targets. ``std_srvs/Trigger``
services: ``estop``, ``reset_estop``, ``error_recovery``,
``franka_gripper/{homing,open,grasp,stop}`` (with two arms, gripper services and the pose topics are
prefixed by the arm name).

``ee_impedance`` arms (``robot.arms[*].control``, libfranka or sim backend): a ``target_pose``
is not turned into joints but handed to the arm's torque loop, which tracks it with the
Cartesian impedance law and the arm's gains (:meth:`robot_drivers.arm.FrankaArm.track_pose`);
the watchdog and the e-stop end that loop (position control holds) like any motion.

Bridge mode (an arm with ``backend: bridge``, ``rlinf_ros/bridge_io.py``): the arm is an existing
ros2_control / franka_ros2 stack; its ``/joint_states`` come in, each safe target goes out to its
trajectory or Cartesian controller, and this node publishes the topics above as for any arm.

A timer at ``driver_hz`` samples the active trajectories, commands the arms through their safety
layers and advances the simulated physics; everything runs on one executor thread. A trajectory
is followed for at most the arm's ``safety.watchdog_ms`` after its message arrived: a client
that goes quiet mid-trajectory (killed, disconnected) stops the arm, so senders of long moves
re-send them (the task node re-plans every 0.1 s).

Simulated time (``robot.sim_clock``, simulated arms only): the robot node owns the graph's
clock, the ROS 2 convention for simulators. The driver timer is paced by the wall (steady) clock
at ``driver_hz x real_time_factor``; each tick runs exactly one driver period of physics steps
and publishes ``/clock`` = physics steps run x timestep. The arms' safety clock (watchdog, speed
limit), trajectory sampling and every stamp use that time, and with ``use_sim_time`` the other
nodes' timers follow it: a tick that comes late under CPU load delays the simulated world, not
one node against the others. Without ``sim_clock`` everything here reads the node clock (wall
time, or an external ``/clock`` under ``use_sim_time``). Lock-step (``robot.scene.lockstep``,
:mod:`rlinf_ros.nodes.scene_twin`) is the other way to take wall time out of a twin: there time
advances one control step per applied action, so it excludes ``sim_clock``.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.clock import Clock
from rclpy.clock_type import ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from rlinf_ros.bridge_io import attach_bridges, bridged
from rlinf_ros.config import RobotNodeConfig, RosGraphConfig
from rlinf_ros.conversions import (
    ConversionError,
    Trajectory,
    joint_state_msg,
    pose_from_msg,
    pose_msg,
    trajectory_from_msg,
)
from rlinf_ros.loop_timing import TickIntervals, driver_summary
from rlinf_ros.nodes.common import declare_config, exit_process, now_s, reliable_qos, run_node
from rlinf_ros.nodes.scene_twin import attach_scene
from robot_drivers.arm import FrankaArm
from robot_drivers.factory import make_arm
from robot_drivers.kinematics import o_t_ee_from_grip_site, quat_xyzw_to_matrix, solve_ik
from robot_drivers.safety import describe_event

log = logging.getLogger(__name__)


class RobotNode(Node):
    def __init__(self, cfg: RobotNodeConfig, arms: list[FrankaArm] | None = None) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        cfg = declare_config(self, cfg)  # every setting is a ROS parameter (`-p driver_hz:=200`)
        self.cfg = cfg
        self.arms = arms if arms is not None else [make_arm(a) for a in cfg.arms]
        for arm in self.arms:
            arm.command_period_s = 1.0 / cfg.driver_hz
            arm.connect()
        self.sim_steps = 0  # sim_clock: physics steps run; simulated time = sim_steps x sim_dt
        self.sim_dt, self._steps_per_tick, self.pub_clock = 0.0, 0, None
        if cfg.sim_clock:
            self._start_sim_clock()
        self.trajectories: list[Trajectory | None] = [None] * len(self.arms)
        self._issued: list[float | None] = [None] * len(
            self.arms
        )  # arm clock: when the trajectory arrived
        self._gripper_cmd: list[float | None] = [None] * len(self.arms)
        t = cfg.topics
        qos = reliable_qos()
        self.pub_js = self.create_publisher(JointState, t.joint_states, qos)
        self.pub_grip = self.create_publisher(JointState, t.gripper_joint_states, qos)
        self.pub_pose = [
            self.create_publisher(PoseStamped, self._arm_topic(i, t.ee_pose), qos)
            for i in range(len(self.arms))
        ]
        self.pub_state = self.create_publisher(String, t.robot_state, reliable_qos(1))
        self.create_subscription(
            JointTrajectory, t.joint_trajectory, self._on_trajectory, reliable_qos(10)
        )
        for i in range(len(self.arms)):
            self.create_subscription(
                PoseStamped,
                self._arm_topic(i, t.target_pose),
                functools.partial(self._on_target_pose, i),
                reliable_qos(10),
            )
        if any(hasattr(a.backend, "reset_pose") for a in self.arms):  # simulated twins only
            self.create_subscription(
                JointState, "sim/reset_joints", self._on_reset_joints, reliable_qos(10)
            )
        self._make_services()
        attach_bridges(
            self, self.arms, cfg.bridge, cfg.driver_hz
        )  # bridge mode: an existing stack's topics
        self._bridged = [b for _, _, b in bridged(self.arms)]
        self.scene = attach_scene(
            self, self.arms, cfg.scene
        )  # an arm running a simulator scene (twin)
        if cfg.sim_clock:  # paced by the wall: the tick is what advances simulated time
            self.create_timer(
                self._steps_per_tick * self.sim_dt / cfg.real_time_factor,
                self._tick,
                clock=Clock(clock_type=ClockType.STEADY_TIME),
            )
        else:
            self.create_timer(1.0 / cfg.driver_hz, self._tick)
        # wall time between driver ticks (its period: 1 / driver_hz, or the sim_clock's pacing)
        self.tick_intervals = TickIntervals(
            self._steps_per_tick * self.sim_dt / cfg.real_time_factor
            if cfg.sim_clock
            else 1.0 / cfg.driver_hz
        )
        self.create_timer(1.0 / cfg.publish_hz, self._publish)
        self.create_timer(1.0 / cfg.state_hz, self._publish_state)
        self.stats = {
            "trajectories": 0,
            "rejected": 0,
            "stale_trajectories": 0,
            "target_poses": 0,
        }
        log.info("robot node: arms %s, joints %s", [a.name for a in self.arms], self.joint_names)

    # ---- time ---------------------------------------------------------------------------
    def _start_sim_clock(self) -> None:
        """Own the simulated time: physics timestep, steps per driver period, arms on this clock."""
        models = [fm.model for a in self.arms if (fm := getattr(a.backend, "fm", None)) is not None]
        period = 1.0 / self.cfg.driver_hz
        self.sim_dt = (
            float(models[0].opt.timestep) if models else period
        )  # kinematic arms: one step a tick
        self._steps_per_tick = max(1, round(period / self.sim_dt))
        for arm in self.arms:  # the watchdog and speed limit count simulated time
            arm._clock = arm.safety._clock = self.now
        self.pub_clock = self.create_publisher(ClockMsg, "/clock", reliable_qos(1))
        if not self.get_parameter("use_sim_time").value:
            log.warning(
                "robot.sim_clock publishes /clock but this node's use_sim_time is false: "
                "set use_sim_time: true (graph) so the nodes follow it"
            )
        log.info(
            "simulated time: /clock advances %d x %.4f s per driver tick, at %.2f x real time",
            self._steps_per_tick,
            self.sim_dt,
            self.cfg.real_time_factor,
        )

    def now(self) -> float:
        """Robot time in seconds: the simulated time this node publishes (``sim_clock``), else the
        node clock (wall time, or ``/clock`` under ``use_sim_time``)."""
        return self.sim_steps * self.sim_dt if self.pub_clock is not None else now_s(self)

    def _advance_sim_clock(self) -> None:
        self.sim_steps += self._steps_per_tick
        msg = ClockMsg()
        msg.clock.sec, msg.clock.nanosec = divmod(round(self.now() * 1e9), 1_000_000_000)
        self.pub_clock.publish(msg)  # type: ignore[union-attr]  # only with sim_clock

    # ---- naming -------------------------------------------------------------------------
    def _arm_topic(self, i: int, topic: str) -> str:
        return topic if len(self.arms) == 1 else f"{self.arms[i].name}/{topic}"

    @property
    def joint_names(self) -> list[str]:
        return [n for a in self.arms for n in a.joint_names]

    def _make_services(self) -> None:
        def srv(name: str, fn: Any) -> None:
            def cb(_req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
                ok, message = fn()
                resp.success, resp.message = bool(ok), message
                log.info("service %s -> %s (%s)", name, ok, message)
                return resp

            self.create_service(Trigger, name, cb)

        srv(
            "estop",
            lambda: (
                self._all(lambda a: a.estop("service call")),
                "e-stop latched; call reset_estop",
            ),
        )
        srv(
            "reset_estop", lambda: (self._all(lambda a: a.reset_estop() or True), "e-stop released")
        )
        srv("error_recovery", self._recover)
        for i, arm in enumerate(self.arms):
            g = self._arm_topic(i, "franka_gripper")
            srv(f"{g}/homing", lambda a=arm: _answer(a, "homing", a.gripper_homing))
            srv(
                f"{g}/open",
                lambda a=arm: _answer(
                    a, "open", lambda: a.gripper_move(a.safety.cfg.gripper_max_width)
                ),
            )
            srv(
                f"{g}/grasp",
                lambda a=arm: _answer(
                    a,
                    "grasp",
                    lambda: a.gripper_grasp(self.cfg.grasp_width, force=self.cfg.grasp_force),
                ),
            )
            srv(f"{g}/stop", lambda a=arm: _answer(a, "stop", a.backend.gripper_stop))

    def _recover(self) -> tuple[bool, str]:
        ok = self._all(FrankaArm.recover)
        latched = [a.name for a in self.arms if a.safety.estopped]
        msg = "error recovery done" if ok else "error recovery failed: see the robot node's log"
        return ok, msg + (
            f"; e-stop still latched on {latched}: call reset_estop" if latched else ""
        )

    def _all(self, fn: Any) -> bool:
        results = [fn(a) for a in self.arms]
        for i in range(len(self.arms)):
            self.trajectories[i] = None
        return all(r is None or bool(r) for r in results)

    # ---- commands -----------------------------------------------------------------------
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        # a lock-step twin: one control step per action
        if self.scene is not None and self.scene.lockstep:
            self.stats["trajectories" if self.scene.command(msg) else "stale_trajectories"] += 1
            return
        now = self.now()
        names = set(msg.joint_names)
        for i, arm in enumerate(self.arms):
            finger = arm.gripper_joint_names[0]
            try:
                if names & set(arm.joint_names):
                    self.trajectories[i] = trajectory_from_msg(
                        msg, arm.joint_names, now, arm.state().q
                    )
                    self._issued[i] = arm.now()
                    self.stats["trajectories"] += 1
                if finger in names:
                    final = trajectory_from_msg(msg, [finger], now).positions[-1, 0]
                    self._command_gripper(i, 2.0 * final)
            except ConversionError as e:
                self.stats["rejected"] += 1
                log.warning("rejected JointTrajectory for arm %s: %s", arm.name, e)

    def _on_reset_joints(self, msg: JointState) -> None:
        """Simulated twin: teleport each named arm to the message's joints (episode reset)."""
        names = list(msg.name)
        for i, arm in enumerate(self.arms):
            if not hasattr(arm.backend, "reset_pose") or not set(arm.joint_names) <= set(names):
                continue
            q = np.array([msg.position[names.index(n)] for n in arm.joint_names])
            finger = arm.gripper_joint_names[0]
            width = (
                2.0 * msg.position[names.index(finger)]
                if finger in names
                else arm.state().gripper.width
            )
            arm.backend.reset_pose(q, width)  # type: ignore[attr-defined]  # a simulated arm's
            self.trajectories[i] = None
            self._gripper_cmd[i] = None
            arm.safety.forget_target()
            arm.settle()

    def _command_gripper(self, i: int, width: float) -> None:
        last, arm = self._gripper_cmd[i], self.arms[i]
        # a policy's width changes every step; a hardware move blocks this node (libfranka: the
        # whole process) for the motion: only a change beyond the arm's deadband moves it
        if last is None or abs(last - width) > arm.gripper_deadband:
            if arm.gripper_move(width):
                self._gripper_cmd[i] = width

    def _on_target_pose(self, i: int, msg: PoseStamped) -> None:
        arm = self.arms[i]
        try:
            pose = pose_from_msg(msg)
        except ConversionError as e:
            self.stats["rejected"] += 1
            log.warning("rejected target pose for arm %s: %s", arm.name, e)
            return
        goal = np.eye(4)
        goal[:3, :3] = quat_xyzw_to_matrix(pose.quat_xyzw)
        goal[:3, 3] = pose.position
        if arm.impedance is not None:  # ee_impedance: the torque loop tracks the pose itself
            self.trajectories[i] = None
            out = arm.track_pose(goal, issued_at=arm.now())
            self.stats["target_poses" if not out.refused else "rejected"] += 1
            return
        q0 = arm.state().q
        # the goal is a grip-site pose (the frame current_pose reports); the IK moves the hand TCP
        q1 = solve_ik(q0, o_t_ee_from_grip_site(goal), iters=50)
        duration = max(float(np.max(np.abs(q1 - q0))) / 0.5, 1.0 / self.cfg.driver_hz)  # ~0.5 rad/s
        now = self.now()
        self.trajectories[i] = Trajectory(
            arm.joint_names, np.array([0.0, duration]), np.stack([q0, q1]), now
        )
        self._issued[i] = arm.now()

    # ---- timers -------------------------------------------------------------------------
    def _tick(self) -> None:
        self.tick_intervals.tick()
        if self.pub_clock is not None:
            self._advance_sim_clock()
        if not all(b.ready for b in self._bridged):
            # bridge mode: no measured state to check or command from before the stack's first
            return
        now = self.now()
        for i, arm in enumerate(self.arms):
            traj = self.trajectories[i]
            if traj is not None:
                # the watchdog counts from the message, not from this sample: a long trajectory
                # whose sender went quiet stops watchdog_ms after it arrived (re-send to extend)
                out = arm.move_joints(traj.sample(now), issued_at=self._issued[i])
                if "stale_refused" in out.events:
                    self.trajectories[i] = None
                    self.stats["stale_trajectories"] += 1
                # else: still walking there
                elif now >= traj.end and "velocity_limit" not in out.events:
                    self.trajectories[i] = None
                    arm.settle()
            arm.tick()

    def _publish(self, stamp: float | None = None) -> None:
        """Joint states, gripper and EE pose; ``stamp``: one observation set of a lock-step twin
        (whose sensor topics carry nothing else: its physics only moves per command)."""
        if not all(b.ready for b in self._bridged):
            return  # bridge mode: nothing to report before the stack's first joint state
        if stamp is None and self.scene is not None and self.scene.lockstep:
            return
        stamp = self.now() if stamp is None else stamp
        states = [a.state() for a in self.arms]
        self.pub_js.publish(
            joint_state_msg(
                self.joint_names,
                np.concatenate([s.q for s in states]),
                np.concatenate([s.dq for s in states]),
                np.concatenate([s.tau_j for s in states]),
                stamp=stamp,
            )
        )
        fingers = [n for a in self.arms for n in a.gripper_joint_names]
        widths = np.repeat([s.gripper.width / 2 for s in states], 2)
        self.pub_grip.publish(joint_state_msg(fingers, widths, stamp=stamp))
        for pub, s in zip(self.pub_pose, states):
            pub.publish(pose_msg(s.ee_pose, stamp=stamp, frame_id=self.cfg.frame_id))

    def status(self) -> dict[str, Any]:
        out = {}
        for arm in self.arms:
            s = arm.state()
            out[arm.name] = {
                "mode": s.mode.name,
                "errors": list(s.errors),
                "estop": arm.safety.estopped,
                "holding": arm.holding,
                "control": getattr(arm.backend, "control_mode", "position"),
                "safety": arm.counters,
            }
            bridge = next((b for b in self._bridged if b is arm.backend), None)
            if bridge is not None:  # bridge mode: where the EE pose comes from, commands sent
                out[arm.name]["bridge"] = {
                    "ee_pose_source": bridge.ee_pose_source,
                    "sent": bridge.sent,
                }
        return {"arms": out, **self.stats}

    def _publish_state(self) -> None:
        self.pub_state.publish(String(data=json.dumps(self.status())))

    def close(self) -> None:
        dropped = sum(float(getattr(a.backend, "dropped_time_s", 0.0)) for a in self.arms)
        render = self.scene.render_time if self.scene is not None else None
        log.info("%s", driver_summary(self.tick_intervals, dropped, render))
        for arm in self.arms:
            counts = [describe_event(k, n) for k, n in sorted(arm.counters.items()) if n]
            log.info("[%s] safety over the run: %s", arm.name, ", ".join(counts) or "no events")
        for arm in self.arms:
            arm.backend.hold()
            arm.disconnect()


# a gripper service answers once the motion is done: the libfranka backend's gripper commands
# return when sent (its gripper runs in a process of its own), so the service waits, this long
GRIPPER_SERVICE_WAIT_S = 10.0


def _answer(arm: FrankaArm, action: str, call: Callable[[], bool]) -> tuple[bool, str]:
    """A gripper service's reply: done, or why not (the driver's refusal, e.g. an active e-stop)."""
    arm.last_refusal = ""
    if call() and arm.gripper_wait(GRIPPER_SERVICE_WAIT_S):
        return True, f"{action} done"
    return (
        False,
        f"{action}: {arm.last_refusal}"
        if arm.last_refusal
        else f"{action} failed: the gripper reported it",
    )


def build(cfg: RosGraphConfig, name: str | None) -> RobotNode:
    if not cfg.robot.enabled:
        raise ValueError("robot.enabled is false in this config; nothing to start")
    return RobotNode(cfg.robot)


def main(argv: list[str] | None = None) -> int:
    return run_node("robot", build, argv)


if __name__ == "__main__":
    exit_process(main())
