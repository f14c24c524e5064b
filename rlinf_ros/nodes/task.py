"""Task node of the simulated twin: run episodes against the policy client and score them.

Per episode: pause the policy client (``policy_client/enable`` false), put the arm at the
home pose (plus the simulator's reset noise) — on the simulated twin by a reset message on
``sim/reset_joints`` (``reset: teleport``, as the simulator resets), on a real arm with a
``JointTrajectory`` through the safety layer (``reset: trajectory``) — sample a goal and
publish it as a ``PoseStamped`` on ``task/goal`` (robot base frame — the policy client adds
the spec's ``base_position``, exactly as for a goal coming from perception on a real robot) and,
with ``instructions`` set, one of them drawn for the episode as a ``String`` on
``task/instruction`` (the policy client sends it as the observation's ``instruction``),
resume the client (a new episode), and watch the end-effector pose until the goal is reached or
``max_steps`` control periods have passed; the outcome goes out as an ``EpisodeEvent`` on
``episode/event`` (the recorder's and streamer's reward source on the twin). With ``task:
language`` the robot node runs the simulator's scene: each episode starts with a
``sim/new_episode``, and the scene's report on ``sim/scene`` gives the instruction (relayed on
``task/instruction``), the target and the simulator's own success verdict. ``task: push`` is the
same for a single-task twin (``arms[*].scene: mujoco_franka/push``, ``TaskSceneTwin``): the scene's
target is the push goal (relayed on ``task/goal``), and the first object slot of ``sim/objects``
is relayed as the ``PoseStamped`` object pose on ``task/object_pose`` (same stamp, base frame),
which the policy client's ``object_pos`` features read. With ``judge_ends_episodes: false`` the
twin's verdict is not the reward: it goes out only on ``task/reward`` (the judge a learned reward
is scored against), an episode ends at ``max_steps`` (``truncated``, never a success) or when
someone else ends it on ``episode/event`` (the reward classifier, a human key); the task node
logs its judge's verdict for it and resets the scene for the next. Results go out as JSON on
``task/status`` and, after ``episodes`` episodes, to ``results_path``. A re-record (an end as
``aborted`` on ``episode/event``, the teleop node's key) is followed whichever judge ends
episodes: the episode is logged as aborted, never as a success or failure, the scene resets and
the episode is redone (it does not count toward ``episodes``). The node
logs its verdict per episode; when the graph runs a recorder, the running counts are the
recorder's (what it wrote, ``rlinf_ros.nodes.recorder``), so the task node adds none of its
own to the line (``rlinf collect``'s bar and summary read the same episodes). Everything runs
from one timer: the executor thread never blocks. Warm-up, homing timeouts and the step count of an
episode read the node clock: under ``use_sim_time`` an episode of ``max_steps`` lasts
``max_steps / control_hz`` simulated seconds however slowly the machine runs them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseArray, PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, String
from std_srvs.srv import SetBool
from trajectory_msgs.msg import JointTrajectory

from rlinf_contracts.transitions import (
    EpisodeEvent,
    TransitionError,
    event_from_json,
    event_to_json,
)
from rlinf_ros.config import RosGraphConfig, TaskNodeConfig
from rlinf_ros.conversions import (
    ConversionError,
    joint_state_to_arrays,
    pose_from_msg,
    trajectory_msg,
)
from rlinf_ros.episodes import JUDGES, EpisodeLog, SceneJudge
from rlinf_ros.nodes.common import (
    declare_config,
    exit_process,
    now_s,
    reliable_qos,
    run_node,
    sensor_qos,
)
from robot_drivers.kinematics import lift_first

log = logging.getLogger(__name__)

# single-task scene twins (sim_bridges.mujoco_franka.task_twin): the scene samples goal and object
# and applies the task's own success test, as for the language twin
for _task in ("push", "insert"):
    if _task not in JUDGES:
        JUDGES.add(_task, lambda cfg: SceneJudge())
OBJECTS_TOPIC = "sim/objects"  # the scene twin's object slots (PoseArray, base frame)
OBJECT_TOPIC = (
    "task/object_pose"  # the policy client's object pose (policy_client.object_topic default)
)


class TaskNode(Node):
    def __init__(self, cfg: TaskNodeConfig, recorded: bool = False) -> None:
        super().__init__(cfg.name, namespace=cfg.namespace or None)
        cfg = declare_config(self, cfg)
        self.cfg = cfg
        self.recorded = recorded  # a recorder in the graph counts the episodes it writes
        self.judge = JUDGES.get(cfg.task)(cfg)
        self.rng = np.random.default_rng(cfg.seed)
        self.base = np.asarray(cfg.base_position, dtype=np.float64)
        self.joints = [f"{cfg.joint_prefix}joint{i}" for i in range(1, 8)]
        self.finger = f"{cfg.joint_prefix}finger_joint1"
        self.q: np.ndarray | None = None
        self.ee: np.ndarray | None = None  # policy frame
        self.log = EpisodeLog()
        self.state, self.t_state = "pause", now_s(self)
        self.goal = np.zeros(3)
        self._ok, self._dist, self._steps = False, float("inf"), 0  # the running episode's
        self.instruction = ""
        self.home_target = np.asarray(cfg.home, dtype=np.float64)
        self._pending: Any = None
        self._last_home_cmd = float("-inf")
        self._t_up = now_s(self)
        self.create_subscription(JointState, cfg.joint_states_topic, self._on_joints, sensor_qos())
        self.create_subscription(PoseStamped, cfg.ee_pose_topic, self._on_pose, sensor_qos())
        self.pub_goal = self.create_publisher(PoseStamped, cfg.goal_topic, reliable_qos(1))
        self.pub_instruction = self.create_publisher(String, cfg.instruction_topic, reliable_qos(1))
        self.pub_cmd = self.create_publisher(JointTrajectory, cfg.command_topic, reliable_qos(10))
        self.pub_status = self.create_publisher(String, cfg.status_topic, reliable_qos(1))
        self.pub_reset = self.create_publisher(JointState, "sim/reset_joints", reliable_qos(10))
        self.pub_event = self.create_publisher(String, cfg.event_topic, reliable_qos(10))
        self.pub_reward = (
            self.create_publisher(Float64, cfg.reward_topic, reliable_qos(10))
            if cfg.reward_topic
            else None
        )
        # another judge's ends (judge_ends_episodes false) and, in either mode, a re-record: the
        # operator throws the running episode away, so it is redone whoever judges it
        self.create_subscription(String, cfg.event_topic, self._on_event, reliable_qos(10))
        self.enable = self.create_client(SetBool, cfg.enable_service)
        self.scene: dict[str, Any] = {}
        self.scene_episode = 0  # the scene episode this task episode waits for / runs
        self._last_scene_req = float("-inf")
        if getattr(self.judge, "uses_scene", False):
            self.create_subscription(String, cfg.scene_topic, self._on_scene, reliable_qos(1))
            self.pub_new_episode = self.create_publisher(
                String, cfg.new_episode_topic, reliable_qos(10)
            )
            if cfg.task != "language":  # a task twin's object: relayed for the object_pos features
                self.pub_object = self.create_publisher(PoseStamped, OBJECT_TOPIC, sensor_qos())
                self.create_subscription(PoseArray, OBJECTS_TOPIC, self._on_objects, sensor_qos())
        self.create_timer(0.02, self._step)
        log.info(
            "task node: %s, %s episodes of %d steps @ %.0f Hz",
            cfg.task,
            cfg.episodes or "endless",
            cfg.max_steps,
            cfg.control_hz,
        )

    # ---- inputs ---------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        try:
            self.q = joint_state_to_arrays(msg, self.joints)[0]
        except ConversionError:
            pass

    def _on_scene(self, msg: String) -> None:
        try:
            self.scene = json.loads(msg.data)
        except json.JSONDecodeError:
            log.warning("ignoring a malformed scene report")

    def _on_objects(self, msg: PoseArray) -> None:
        if not msg.poses:
            return
        out = PoseStamped()
        out.header = msg.header
        out.pose = msg.poses[0]  # type: ignore[index]  # a list at run time
        self.pub_object.publish(out)

    def _scene_ready(self) -> bool:
        """Scene twin: the scene reports the episode this task episode asked for."""
        if not getattr(self.judge, "uses_scene", False):
            return True
        if self.scene.get("episode", -1) < self.scene_episode:
            now = now_s(self)
            # re-sent until served (robot node ignores repeats)
            if now - self._last_scene_req >= 0.5:
                self._last_scene_req = now
                self.pub_new_episode.publish(String(data=str(self.scene_episode)))
            return False
        self.instruction = str(self.scene.get("instruction", ""))
        self.goal = np.asarray(self.scene.get("target", [0.0, 0.0, 0.0]), dtype=np.float64)
        return True

    def _on_pose(self, msg: PoseStamped) -> None:
        self.ee = pose_from_msg(msg).position + self.base

    # ---- the episode state machine -------------------------------------------------------
    def _enter(self, state: str) -> None:
        self.state, self.t_state = state, now_s(self)

    def _elapsed(self) -> float:
        return now_s(self) - self.t_state

    def _call_enable(self, on: bool) -> bool:
        """Send one SetBool to the policy client; True once it has answered."""
        if self._pending is None:
            if not self.enable.service_is_ready():
                return False
            self._pending = self.enable.call_async(SetBool.Request(data=on))
            return False
        if not self._pending.done():
            return False
        self._pending = None
        return True

    def _step(self) -> None:
        getattr(self, f"_on_{self.state}")()

    def _on_pause(self) -> None:
        if now_s(self) - self._t_up < self.cfg.warmup_s:
            return  # let the other nodes of the graph discover each other before the first episode
        if self._call_enable(False):
            # the simulator's reset: layout, colours, instruction
            if getattr(self.judge, "uses_scene", False):
                self.scene_episode = max(self.scene_episode, int(self.scene.get("episode", 0))) + 1
                self._last_scene_req = float("-inf")  # sent by _scene_ready
            self.home_target = np.asarray(self.cfg.home) + self.rng.normal(
                0.0, self.cfg.home_noise, 7
            )
            self._last_home_cmd = float("-inf")
            self._enter("homing")

    def _on_homing(self) -> None:
        # the scene's reset put the arm where the simulator does
        if getattr(self.judge, "uses_scene", False):
            if self._scene_ready():
                self._publish_goal()
                self._enter("start")
            return
        out = self.pub_reset if self.cfg.reset == "teleport" else self.pub_cmd
        if self.q is None or out.get_subscription_count() == 0:
            return
        err = float(np.max(np.abs(self.q - self.home_target)))
        if err < self.cfg.home_tolerance:
            self.goal = self.judge.sample_goal(self.rng)
            if self.cfg.instructions:
                self.instruction = str(
                    self.cfg.instructions[int(self.rng.integers(len(self.cfg.instructions)))]
                )
            self._publish_goal()
            self._enter("start")
            return
        if self._elapsed() > self.cfg.home_timeout_s:
            log.error(
                "arm not home after %.0f s (max joint error %.3f rad); retrying",
                self.cfg.home_timeout_s,
                err,
            )
            self._enter("homing")
        now = now_s(self)
        if now - self._last_home_cmd >= 0.1:  # re-planned from where the arm is; re-sent within the
            # robot's watchdog, which stops a trajectory whose sender went quiet
            self._last_home_cmd = now
            point = np.append(self.home_target, 0.04)
            if self.cfg.reset == "teleport":  # the simulated twin resets like the simulator does
                msg = JointState(
                    name=[*self.joints, self.finger], position=[float(x) for x in point]
                )
                msg.header.stamp = self.get_clock().now().to_msg()
                self.pub_reset.publish(msg)
                return
            # a real arm goes home by a path that never sweeps the hand down (through the table
            # and the safety layer's workspace floor, where it would stop for good)
            target = lift_first(self.q, self.home_target)
            duration = max(0.5, float(np.max(np.abs(target - self.q))))  # ~1 rad/s at most
            self.pub_cmd.publish(
                trajectory_msg(
                    [*self.joints, self.finger],
                    np.append(target, 0.04)[None],
                    np.array([duration]),
                    stamp=now_s(self),
                )
            )

    def _publish_goal(self) -> None:
        msg = PoseStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = "base"
        x, y, z = (float(v) for v in self.goal - self.base)
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = x, y, z
        msg.pose.orientation.w = 1.0
        self.pub_goal.publish(msg)
        # with the goal, before the client is enabled: the episode's first request has it
        if self.instruction:
            self.pub_instruction.publish(String(data=self.instruction))

    def _on_start(self) -> None:
        self._publish_goal()  # again: a late-joining client still gets it (depth-1 reliable)
        if self._elapsed() > 0.2 and self._call_enable(True):
            self._enter("running")

    def _on_running(self) -> None:
        steps = int(self._elapsed() * self.cfg.control_hz)
        dist = float("inf") if self.ee is None else float(np.linalg.norm(self.ee - self.goal))
        if getattr(self.judge, "uses_scene", False):
            ok = bool(self.scene.get("success")) and self.scene.get("episode") == self.scene_episode
            if "steps" in self.scene and self.scene.get("episode") == self.scene_episode:
                # a lock-step twin counts its own control steps: scored as the simulator does
                steps = int(self.scene["steps"])
                first = self.scene.get("success_step")
                ok = first is not None and int(first) <= self.cfg.max_steps
        else:
            ok = self.ee is not None and self.judge.success(self.ee, self.goal)
        if self.pub_reward is not None:  # the twin knows success: a reward source of its own
            self.pub_reward.publish(Float64(data=1.0 if ok else 0.0))
        self._ok, self._dist, self._steps = ok, dist, steps
        if steps >= self.cfg.max_steps or ok and self.cfg.judge_ends_episodes:
            # the episode's reward when the judge ends episodes; else a timeout, never a success
            self._close(ok, publish_success=ok and self.cfg.judge_ends_episodes)

    def _on_event(self, msg: String) -> None:
        """Another's end of the running episode: reset for the next. With ``judge_ends_episodes``
        false every end is followed (the classifier's, a human key); with it true this node's
        judge decides success and failure, and only a re-record (``aborted``: the operator threw
        the episode away) is followed. An aborted episode counts toward neither ``episodes`` nor
        the success rate, so it is redone. This node's own ends come back here too, after it has
        left ``running``."""
        try:
            ev = event_from_json(msg.data)
        except TransitionError:
            return
        if self.cfg.judge_ends_episodes and ev.status != "aborted":
            return
        if ev.kind == "end" and self.state == "running":
            log.info("episode ended by %s (success %s)", ev.reason or "an event", ev.success)
            self._close(self._ok, publish_success=None, status=ev.status)

    def _close(self, ok: bool, publish_success: bool | None, status: str = "") -> None:
        """Log the episode (``ok``: this task's own verdict; ``status`` ``aborted`` when someone
        else threw it away), send its end event with ``publish_success`` (None: someone else
        ended it) and move on."""
        aborted = status == "aborted"
        self.log.add(ok, self._steps, self._dist, self.goal, "aborted" if aborted else "")
        summary = self.log.summary()
        verdict = "aborted" if aborted else ("success" if ok else "timeout")
        tally = (
            ""
            if self.recorded or not summary["episodes"]
            else f"; judged success rate {summary['success_rate']:.2f} over {summary['episodes']}"
        )
        log.info(
            "episode %d judged %s after %d steps (distance %.3f m)%s",
            len(summary["results"]) - 1,
            verdict,
            self._steps,
            self._dist,
            tally,
        )
        self.pub_status.publish(
            String(data=json.dumps({k: v for k, v in summary.items() if k != "results"}))
        )
        if publish_success is not None:  # the recorder / streamer label it
            end = EpisodeEvent(
                "end",
                status="complete" if publish_success else "truncated",
                success=publish_success,
                reason="success" if publish_success else "timeout",
                stamp=now_s(self),
            )
            self.pub_event.publish(String(data=event_to_json(end)))
        self._enter(
            "done" if self.cfg.episodes and summary["episodes"] >= self.cfg.episodes else "pause"
        )

    def _on_done(self) -> None:
        if self._call_enable(False):
            self._finish()
            self._enter("idle")

    def _on_idle(self) -> None:
        pass

    def _finish(self) -> None:
        summary = self.log.summary()
        log.info(
            "task done: %d/%d judged episodes succeeded (%d aborted)",
            summary["successes"],
            summary["episodes"],
            summary["aborted"],
        )
        if self.cfg.results_path:
            path = Path(self.cfg.results_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(json.dumps(summary, indent=1))
            tmp.rename(path)


def build(cfg: RosGraphConfig, name: str | None) -> TaskNode:
    if not cfg.task.enabled:
        raise ValueError("task.enabled is false in this config; nothing to start")
    return TaskNode(cfg.task, recorded=cfg.recorder.enabled)


def main(argv: list[str] | None = None) -> int:
    return run_node("task", build, argv)


if __name__ == "__main__":
    exit_process(main())
