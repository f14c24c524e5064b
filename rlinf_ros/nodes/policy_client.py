"""Policy client node: robot topics -> the spec's observation -> policy server -> joint commands.

Subscribes to ``joint_states``, the gripper joint states, each arm's end-effector pose, the task
inputs the robot spec needs (a ``PoseStamped`` goal on ``task/goal``, an object pose), the task
instruction (``std_msgs/String`` on ``task/instruction``; it goes out as ``instruction`` in every
observation, what a language-conditioned policy reads) and one Image topic per camera; matches
joints and images within ``slop_s`` (:class:`rlinf_ros.sync.ApproxTimeSync`); builds the state
vector the spec describes (the same features the simulator computes, ``rlinf_ros.robot_io``); sends
it over the wire from a background thread; and decodes the answer with the spec's control law into
one ``JointTrajectory`` point per control tick (arm joints plus ``<prefix>finger_joint1``). An
``ee_impedance`` spec sends each arm's impedance target instead, a ``PoseStamped`` (base frame)
on ``target_pose_topics`` (the robot node's ``target_pose``), and only the finger joint on the
trajectory topic.

On connect the client announces its robot spec; a server whose policy was trained for another
layout refuses it once (``refused`` in the status, both layouts in the log) and the client does
not retry. A lost server means *hold* (last target) and reconnect. ``policy_client/enable``
(``std_srvs/SetBool``) pauses the client (no commands: a supervisor may move the arm) and, on
true, starts a new episode. Status (mode, counters, latency percentiles) goes out as JSON on
``policy_client/status``.

Lock-step (``lockstep``, with a lock-step sim twin: ``robot.scene.lockstep``): joints, gripper,
EE poses, objects and frames are matched by exact stamp, the client acts once per new set
(waiting for the server's answer), stamps the command with that set's stamp (the twin steps its
physics one simulator control step per such command) and never sends holds; a set that comes
again (the twin re-sends an unanswered one) gets the same command again. So a twin step means
what a simulator step means: the action answers the observation of the state it is applied to.

Time: the control timer, command stamps, observation age (``max_obs_age_s``) and teleop
freshness use the node clock, so under ``use_sim_time`` the client acts once per control period
of simulated time (the robot node's ``/clock``). Waiting for the server's answer, reconnecting
and ``infer_timeout_s`` are wall time: they bound a network round trip and a computation.
In real time the client acts on the newest set; once 100 policy steps in, it warns if their
observations were over half a control period old (p50) when the commands went out
(:func:`rlinf_ros.loop_timing.stale_observation_warning`): cameras no faster than the control
tick make that age depend on the phase between the two.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseArray, PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String, UInt8MultiArray
from std_srvs.srv import SetBool
from trajectory_msgs.msg import JointTrajectory

from rlinf_contracts.features import MissingInput, RobotReading, needs
from rlinf_contracts.rotations import matrix_to_quat_xyzw
from rlinf_contracts.transitions import StepRecord, TransitionError, event_from_json
from rlinf_contracts.wire import packb
from rlinf_ros.config import PolicyClientConfig, RosGraphConfig
from rlinf_ros.conversions import (
    ConversionError,
    image_to_rgb,
    joint_state_to_arrays,
    pose_from_msg,
    pose_msg,
    stamp_to_sec,
    trajectory_msg,
)
from rlinf_ros.loop_timing import stale_observation_warning
from rlinf_ros.nodes.common import (
    NOT_PARAMETERS,
    declare_config,
    exit_process,
    now_s,
    reliable_qos,
    run_node,
    sensor_qos,
)
from rlinf_ros.policy_loop import ARM_DOF, InferClient, InferenceWorker, PolicyLoop
from rlinf_ros.robot_io import SpecIO, reading_from_pose
from rlinf_ros.sync import ApproxTimeSync
from rlinf_ros.takeover import HumanTakeover
from robot_drivers.types import EEPose

log = logging.getLogger(__name__)


def wire_client_factory(cfg: PolicyClientConfig) -> Any:
    """Connect function for :class:`InferenceWorker`: one attempt, our worker does the retrying."""
    from policy_server.client import PolicyClient

    # our worker logs loss / return once; the client's per-attempt warnings would repeat every retry
    logging.getLogger("policy_server.client").setLevel(logging.ERROR)
    spec = cfg.spec()
    api_key = cfg.resolved_api_key()

    def connect() -> InferClient:
        return PolicyClient(
            cfg.server_url,
            api_key=api_key,
            timeout_s=cfg.infer_timeout_s,
            connect_timeout_s=max(cfg.infer_timeout_s, 1.0),
            retries=0,
            robot_spec=spec,
        )

    return connect


def _final_errors() -> tuple[type[BaseException], ...]:
    from policy_server.client import SpecRefused
    from rlinf_ros.policy_loop import SpecRefusal

    return (SpecRefused, SpecRefusal)


class PolicyClientNode(Node):
    def __init__(self, cfg: PolicyClientConfig, connect: Any = None) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        cfg = declare_config(self, cfg, skip=(*NOT_PARAMETERS, "robot_spec"))
        self.cfg = cfg
        self.spec = cfg.spec()
        self.io = SpecIO(self.spec)
        self.hz = cfg.rate_hz
        self.arm_joints = [
            [f"{p}joint{i}" for i in range(1, ARM_DOF + 1)] for p in cfg.joint_prefixes
        ]
        self.fingers = [f"{p}finger_joint1" for p in cfg.joint_prefixes]
        n = len(cfg.joint_prefixes)
        self.lockstep = bool(cfg.lockstep)
        # lock-step: every input of the state comes from the same set (one stamp, nothing newer)
        extra = [
            *(f"pose{i}" for i in range(n)),
            "gripper",
            *(["objects"] if needs(self.spec, "objects") else []),
        ]
        self.sync = ApproxTimeSync(
            ["joints", *(extra if self.lockstep else []), *cfg.cameras],
            slop=1e-6 if self.lockstep else cfg.slop_s,
        )
        self._set: Any = None  # lock-step: the newest set, and the command that answered it
        self._answer: tuple[float, JointTrajectory] | None = None
        # lock-step waits for the twin's next set, which waits on our answer (a computation): wall
        # time
        self._last_set, self._warned_sets = time.monotonic(), False
        self._grippers = [0.0] * n
        self._poses: list[Any] = [None] * n
        self._goal: np.ndarray | None = None
        self._object: np.ndarray | None = None
        self._objects: np.ndarray | None = None
        self.instruction = cfg.instruction or self.spec.instruction
        self.enabled = True
        self._subscribe(cfg)
        self.pub_cmd = self.create_publisher(JointTrajectory, cfg.command_topic, reliable_qos(10))
        self.pub_target = (
            [
                self.create_publisher(PoseStamped, topic, reliable_qos(10))
                for topic in cfg.target_pose_topics[:n]
            ]
            if self.io.impedance
            else []
        )
        self.pub_status = self.create_publisher(String, cfg.status_topic, reliable_qos(1))
        self.create_service(SetBool, cfg.enable_service, self._on_enable)
        self.worker = (
            InferenceWorker(
                connect or wire_client_factory(cfg),
                cfg.reconnect_s,
                cfg.name,
                final_errors=_final_errors(),
                clock=self.now,
            )
            if not cfg.teleop_only
            else None
        )
        # lock-step: a chunk is executed whole before the next observation is sent (prefetch 0),
        # as the simulator's eval executes it, and each tick waits for its answer
        self.loop = PolicyLoop(
            self.worker,  # type: ignore[arg-type]  # None only when teleop_only: nothing is inferred
            self.io,
            prefetch=0 if self.lockstep else 1,
            max_wait_s=cfg.infer_timeout_s if self.lockstep else cfg.max_wait_fraction / self.hz,
            rtc=None if self.lockstep else cfg.rtc,
            clock=self.now,
        )
        self.human = HumanTakeover(self.io, cfg.teleop_timeout_s, always=cfg.teleop_only)
        self.episode = 0
        self.pub_step = (
            self.create_publisher(UInt8MultiArray, cfg.step_topic, reliable_qos(50))
            if cfg.step_topic
            else None
        )
        self.stale_obs = 0
        self.reused_obs = 0
        self.missing = ""
        self.create_timer(1.0 / self.hz, self._tick)
        self.create_timer(0.5, self._publish_status)
        self._warned_age = False  # the stale-observation warning is given once per run
        log.info(
            "policy client @ %.1f Hz, server %s, robot spec: %s",
            self.hz,
            cfg.server_url,
            self.spec.describe(),
        )

    def now(self) -> float:
        """The node clock (s): stamps, observation age, teleop freshness; simulated under
        use_sim_time."""
        return now_s(self)

    def _subscribe(self, cfg: PolicyClientConfig) -> None:
        self.create_subscription(JointState, cfg.joint_states_topic, self._on_joints, sensor_qos())
        self.create_subscription(
            JointState, cfg.gripper_joint_states_topic, self._on_gripper, sensor_qos()
        )
        for i, topic in enumerate(cfg.ee_pose_topics[: len(self._poses)]):
            self.create_subscription(
                PoseStamped, topic, functools.partial(self._on_pose, i), sensor_qos()
            )
        if needs(self.spec, "goal_pos"):
            self.create_subscription(PoseStamped, cfg.goal_topic, self._on_goal, reliable_qos(1))
        if needs(self.spec, "object_pos"):
            self.create_subscription(PoseStamped, cfg.object_topic, self._on_object, sensor_qos())
        if needs(self.spec, "objects"):
            self.create_subscription(PoseArray, cfg.objects_topic, self._on_objects, sensor_qos())
        for cam, topic in cfg.cameras.items():
            self.create_subscription(
                Image, topic, functools.partial(self._on_image, cam), sensor_qos()
            )
        # volatile: also hears `ros2 topic pub`; the task node re-sends per episode
        if cfg.instruction_topic:
            self.create_subscription(
                String, cfg.instruction_topic, self._on_instruction, reliable_qos(1)
            )
        self.create_subscription(
            String, cfg.robot_state_topic, self._on_robot_state, reliable_qos(1)
        )
        self.create_subscription(String, cfg.teleop_topic, self._on_teleop, reliable_qos(5))
        self.create_subscription(String, cfg.event_topic, self._on_event, reliable_qos(10))

    # ---- inputs -------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        try:
            per_arm = [joint_state_to_arrays(msg, names)[:2] for names in self.arm_joints]
        except ConversionError:
            return  # another publisher's joints (e.g. the gripper) on a shared topic
        self.sync.add("joints", stamp_to_sec(msg.header.stamp), per_arm)
        if self.lockstep:
            self._lockstep_tick()

    def _on_gripper(self, msg: JointState) -> None:
        for i, finger in enumerate(self.fingers):
            if finger in msg.name:
                self._grippers[i] = 2.0 * float(msg.position[list(msg.name).index(finger)])
        self._add_lockstep("gripper", msg, list(self._grippers))

    def _on_pose(self, i: int, msg: PoseStamped) -> None:
        try:
            self._poses[i] = pose_from_msg(msg)
        except ConversionError as e:
            log.warning("end-effector pose: %s", e)
            return
        self._add_lockstep(f"pose{i}", msg, self._poses[i])

    def _add_lockstep(self, stream: str, msg: Any, value: Any) -> None:
        if self.lockstep:
            self.sync.add(stream, stamp_to_sec(msg.header.stamp), value)
            self._lockstep_tick()

    def _on_goal(self, msg: PoseStamped) -> None:
        self._goal = pose_from_msg(msg).position

    def _on_object(self, msg: PoseStamped) -> None:
        self._object = pose_from_msg(msg).position

    def _on_objects(self, msg: PoseArray) -> None:
        self._objects = np.array(
            [[p.position.x, p.position.y, p.position.z] for p in msg.poses], dtype=np.float64
        )
        self._add_lockstep("objects", msg, self._objects)

    def _on_instruction(self, msg: String) -> None:
        text = " ".join(msg.data.split())
        if text and text != self.instruction:
            log.info("instruction: %r", text)
            self.instruction = text

    def _on_image(self, cam: str, msg: Image) -> None:
        self.sync.add(cam, stamp_to_sec(msg.header.stamp), msg)  # decoded only when used
        if self.lockstep:
            self._lockstep_tick()

    def _on_robot_state(self, msg: String) -> None:
        changed = self.human.on_robot_state(msg.data)
        if changed:
            log.warning("robot cannot move (%s): commanding nothing until it is clear", changed)
            self.loop.reset()  # resume later from the measured joints, not from a stale plan
        elif not self.human.blocked and self.loop.stats.reason == "robot_blocked":
            log.info("robot clear again: resuming")

    def _on_teleop(self, msg: String) -> None:
        try:
            self.human.on_teleop(msg.data, self.now())
        except (TransitionError, ValueError) as e:
            log.warning("ignoring teleop command: %s", e)

    def _on_event(self, msg: String) -> None:
        try:
            ev = event_from_json(msg.data)
        except TransitionError as e:
            log.warning("ignoring episode event: %s", e)
            return
        if ev.kind == "begin":
            self._new_episode()

    def _new_episode(self) -> None:
        self.episode += 1
        self.loop.reset()
        if self.lockstep:  # an answer still in flight belongs to the last episode
            if self.worker is not None and self.worker.busy:
                self.worker.wait(self.cfg.infer_timeout_s)
            if self.worker is not None:
                self.worker.take()
            self._set, self._answer = None, None
            self._last_set = time.monotonic()

    def _on_enable(self, req: SetBool.Request, resp: SetBool.Response) -> SetBool.Response:
        self.enabled = bool(req.data)
        if self.enabled:
            self._new_episode()
            if self.lockstep:
                self._lockstep_tick()  # the reset observation may already be here
        resp.success, resp.message = True, "enabled: new episode" if self.enabled else "paused"
        log.info("policy client %s", resp.message)
        return resp

    # ---- control ------------------------------------------------------------------------
    def _readings(self, per_arm: list[tuple[np.ndarray, np.ndarray]]) -> list[RobotReading]:
        out = []
        for i, (q, dq) in enumerate(per_arm):
            pose = self._poses[i]
            out.append(
                reading_from_pose(
                    q,
                    dq,
                    self._grippers[i],
                    None if pose is None else pose.position,
                    None if pose is None else pose.quat_xyzw,
                    goal_pos=self._goal,
                    object_pos=self._object,
                    objects=self._objects,
                )
            )
        return out

    def _observation(
        self, found: Any = None
    ) -> tuple[dict[str, Any] | None, list[RobotReading] | None, float | None]:
        if found is not None:  # lock-step: every input from this one set
            for i in range(len(self._poses)):
                self._poses[i] = found[f"pose{i}"][1]
            self._grippers = list(found["gripper"][1])
            if "objects" in found:
                self._objects = found["objects"][1]
        else:
            found = self.sync.pop_newest()
        if found is None and self.cfg.reuse_observation and self.sync.last is not None:
            found = (
                self.sync.last
            )  # no newer set yet (camera slower than control): act on the newest
            self.reused_obs += 1
        if found is None:
            return None, None, None
        t_obs = max(stamp for stamp, _ in found.values())
        readings = self._readings(found["joints"][1])
        try:
            images = {cam: image_to_rgb(found[cam][1]) for cam in self.cfg.cameras}
            obs = self.io.observation(readings, images, self.instruction)
        except (ConversionError, MissingInput) as e:
            if str(e) != self.missing:
                log.warning("cannot build the observation: %s", e)
                self.missing = str(e)
            return None, readings, None
        self.missing = ""
        return obs, readings, t_obs

    def _lockstep_tick(self) -> None:
        """Lock-step: act once on each new set (see the module docstring); a timer retries."""
        if not self.enabled or self.human.blocked or self.worker is None:
            return
        found = self.sync.pop_newest()
        now = time.monotonic()
        if found is None and self.episode and now - self._last_set > 10.0 and not self._warned_sets:
            self._warned_sets = True  # e.g. a real-time robot: its topics never share one stamp
            log.warning(
                "lock-step: no observation set (joints, gripper, pose, objects, cameras "
                "under one stamp) for 10 s; the robot node must run lock-step too "
                "(robot.scene.lockstep: true)"
            )
        if found is not None:
            self._last_set = now
            stamp = max(st for st, _ in found.values())
            if self._answer is not None and abs(self._answer[0] - stamp) <= 1e-6:
                self.pub_cmd.publish(self._answer[1])  # the set came again: our answer was lost
                return
            self._set = found
        if self._set is None or self._answer is not None and self._answer[0] == self._set_stamp():
            return
        obs, readings, t_obs = self._observation(self._set)
        cmd = self.loop.tick(obs, readings, t_obs)
        if cmd is None or cmd.kind != "policy" or t_obs is None:
            return  # no answer yet: the next callback or timer tick loads it
        msg = self._command_msg(cmd, stamp=t_obs)
        self._answer = (t_obs, msg)
        self.pub_cmd.publish(msg)
        self._publish_step(obs, cmd, t_obs)

    def _set_stamp(self) -> float:
        return max(st for st, _ in self._set.values())

    def _command_msg(self, cmd: Any, stamp: float | None = None) -> JointTrajectory:
        names = [n for js in self.arm_joints for n in js] + self.fingers
        point = np.concatenate([*cmd.joints, np.asarray(cmd.grippers) / 2.0])
        stamp = self.now() if stamp is None else stamp
        return trajectory_msg(names, point[None], np.array([1.0 / self.hz]), stamp=stamp)

    def _publish_step(self, obs: dict[str, Any] | None, cmd: Any, t_obs: float | None) -> None:
        if self.pub_step is not None and obs is not None and cmd.action is not None:
            rec = StepRecord(
                episode=self.episode,
                state=obs["state"],
                action=cmd.action,
                images=obs["images"],
                intervention=cmd.kind == "teleop",
                policy_version=cmd.version,
                timestamp=t_obs or 0.0,
            )
            self.pub_step.publish(UInt8MultiArray(data=packb(rec.to_wire())))

    def _tick(self) -> None:
        if self.lockstep:
            self._lockstep_tick()
            return
        if not self.enabled:
            return
        obs, readings, t_obs = self._observation()
        if t_obs is not None and self.now() - t_obs > self.cfg.max_obs_age_s:
            self.stale_obs += 1  # a stale set is never sent: the policy would act on the past
            obs = None
        if self.human.blocked:  # e-stopped / in error: publish nothing (see rlinf_ros.takeover)
            self.loop.stats.mode, self.loop.stats.reason = "hold", "robot_blocked"
            return
        teleop = self.human.active(self.now())
        if teleop is not None and readings is not None:
            try:
                cmd = self.human.command(teleop, readings)
            except MissingInput as e:  # the human's command cannot be decoded yet: hold
                if str(e) != self.missing:
                    log.warning("teleop command held: %s", e)
                    self.missing = str(e)
                return
            self.loop.interrupt(cmd)  # the policy re-plans from the next observation
        elif self.cfg.teleop_only:
            return
        else:
            cmd = self.loop.tick(obs, readings, t_obs)
        if cmd is None:
            return
        self._publish_command(cmd)
        self._publish_step(obs, cmd, t_obs)

    def _publish_command(self, cmd: Any) -> None:
        """Joint targets (+ gripper) as one trajectory point; ``ee_impedance``: the target poses
        on their topics and the gripper alone on the trajectory topic."""
        if cmd.poses is None:
            self.pub_cmd.publish(self._command_msg(cmd))
            return
        stamp = self.now()
        for pub, pose in zip(self.pub_target, cmd.poses):
            pub.publish(
                pose_msg(
                    EEPose(pose[:3, 3], matrix_to_quat_xyzw(pose[:3, :3])),
                    stamp=stamp,
                )
            )
        widths = np.asarray(cmd.grippers) / 2.0
        self.pub_cmd.publish(
            trajectory_msg(self.fingers, widths[None], np.array([1.0 / self.hz]), stamp=stamp)
        )

    def status(self) -> dict[str, Any]:
        w = self.worker
        return {
            **self.loop.stats.summary(),
            "connected": bool(w and w.connected),
            "connects": w.connects if w else 0,
            "failures": w.failures if w else 0,
            "stale_obs": self.stale_obs,
            "reused_obs": self.reused_obs,
            "refused": w.refused if w else "",
            "enabled": self.enabled,
            "missing_input": self.missing,
            "blocked": self.human.blocked,
            "teleop_steps": self.human.teleop_steps,
            "episode": self.episode,
            "instruction": self.instruction,
        }

    def _publish_status(self) -> None:
        status = self.status()
        self.pub_status.publish(String(data=json.dumps(status)))
        if not self._warned_age and not self.lockstep and status.get("policy_steps", 0) >= 100:
            self._warned_age = True  # once, after the first 100 policy steps: a run's phase
            warning = stale_observation_warning(status.get("command_ms_p50"), 1.0 / self.hz)
            if warning:
                log.warning("%s", warning)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop()
        log.info("%s", loop_summary(self.status()))


def loop_summary(status: dict[str, Any]) -> str:
    """The line the client leaves when it stops: what the loop did and how old its observations
    were when their commands went out (the frame's stamp to the command; a real-time policy acts
    on the past by that much), so two runs of one checkpoint can be told apart by their timing.

    >>> line = loop_summary({"policy_steps": 80, "hold_steps": 3, "late_steps": 1,
    ...                      "missed_waits": 2, "stale_obs": 0, "command_ms_p50": 31.4,
    ...                      "command_ms_p99": 52.0, "infer_ms_p50": 8.2})
    >>> line.split("; ")[0]
    'policy loop: 80 policy steps, 3 held, 1 late, 2 missed waits, 0 stale observations'
    >>> line.split("; ")[1:]
    ['observation -> command p50 31 ms, p99 52 ms', 'inference p50 8 ms']
    >>> loop_summary({}).split("; ")[1]
    'observation -> command p50 -, p99 -'
    """

    def ms(key: str) -> str:
        v = status.get(key)
        return "-" if v is None else f"{v:.0f} ms"

    return (
        f"policy loop: {status.get('policy_steps', 0)} policy steps, "
        f"{status.get('hold_steps', 0)} held, {status.get('late_steps', 0)} late, "
        f"{status.get('missed_waits', 0)} missed waits, {status.get('stale_obs', 0)} stale "
        f"observations; observation -> command p50 {ms('command_ms_p50')}, p99 "
        f"{ms('command_ms_p99')}; inference p50 {ms('infer_ms_p50')}"
    )


def build(cfg: RosGraphConfig, name: str | None) -> PolicyClientNode:
    if not cfg.policy_client.enabled:
        raise ValueError("no enabled 'policy_client' section in this config; nothing to start")
    return PolicyClientNode(cfg.policy_client)


def main(argv: list[str] | None = None) -> int:
    return run_node("policy_client", build, argv)


if __name__ == "__main__":
    exit_process(main())
