"""The robot node's side of a twin whose arm runs a simulator scene (``arms[*].scene``).

Why in the robot node: the scene's MuJoCo data *is* the arm's physics, so the camera frames,
object positions and the success test come from the state the arm is in, with no second copy
of the world to keep in step. What a lab would get from perception goes out on topics:

- ``sim/objects`` (``geometry_msgs/PoseArray``, robot base frame, one pose per object slot):
  the object positions a policy's state features read (``obj<i>_minus_ee``);
- one ``sensor_msgs/Image`` per ``robot.scene.cameras`` entry (scene camera -> topic), rendered
  as the simulator renders its observations (episode colours, its image size);
- ``sim/scene`` (``std_msgs/String`` JSON ``{episode, instruction, success, target}``): what the
  task node judges and relays (the instruction, on ``task/instruction``);
- a ``std_msgs/String`` on ``sim/new_episode`` resets the scene as the simulator does.

Lock-step mode (``robot.scene.lockstep``), for validating a checkpoint on the twin: a twin
stepped in real time lets wall-clock effects decide episodes (the policy acting on an older
observation than the simulator's, commands ramped over a period and speed-limited per driver
tick, rendering delaying physics ticks): the same checkpoint scored 0.06-0.29 run to run where
the simulator scores 0.33. In lock-step the physics does not follow wall time. Each
observation set (joints, gripper, EE pose, objects, camera frames) goes out under one stamp;
a ``JointTrajectory`` stamped with that stamp is the action answering it: its final point
becomes the actuator targets at once (through the safety layer, whose clock is the twin's
control-step clock) and the physics advances exactly one simulator control step
(``MujocoArmBackend.step_control``), then the next set goes out. Commands with another stamp
are late answers to an older set and are ignored (counted). A set not answered within
``_RESEND_S`` goes out again under the same stamp (a lost message must not stall the loop).
The scene report then carries ``steps`` (control steps this episode) and ``success_step``
(the first step the simulator's success test held): the task node scores episodes as the
simulator's ``terminate_on_success`` does, whatever the wall-clock rate.

Sim time and lock-step: outside lock-step, stamps and the publication / camera timers use the
robot node's time (the ``/clock`` it publishes with ``robot.sim_clock``, else its node clock).
Lock-step does not publish ``/clock`` (the two settings exclude each other): its observation
stamps identify sets rather than measure time, and its re-send waits on the policy's answer
(a computation), so it counts wall time.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import Pose, PoseArray
from sensor_msgs.msg import Image
from std_msgs.msg import String

from rlinf_ros.conversions import (
    ConversionError,
    numpy_to_image,
    stamp_to_sec,
    to_time_msg,
    trajectory_from_msg,
)
from rlinf_ros.loop_timing import Durations
from rlinf_ros.nodes.common import reliable_qos, sensor_qos
from robot_drivers.lockstep import LockstepStepper

log = logging.getLogger(__name__)

_RESEND_S = 0.5  # lock-step: an unanswered observation set is published again after this long


def world_to_base(backend: Any, points: np.ndarray) -> np.ndarray:
    """World positions ``[K, 3]`` in the arm's base frame: what ``sim/objects`` publishes (the
    frame a lab's perception reports in, and the one the policy client's features read)."""
    d = backend.data
    rot = d.xmat[backend._base].reshape(3, 3)
    return (np.asarray(points) - d.xpos[backend._base]) @ rot


def attach_scene(node: Any, arms: list[Any], cfg: Any) -> Any:
    """Scene topics for the first arm whose backend has a scene; None when no arm has one."""
    arm = next((a for a in arms if getattr(a.backend, "scene", None) is not None), None)
    if arm is None:
        return None
    return SceneTopics(node, arm, cfg)


class SceneTopics:
    def __init__(self, node: Any, arm: Any, cfg: Any) -> None:
        self.node, self.arm, self.backend, self.cfg = node, arm, arm.backend, cfg
        self.pub_objects = node.create_publisher(PoseArray, cfg.objects_topic, sensor_qos())
        self.pub_scene = node.create_publisher(String, cfg.scene_topic, reliable_qos(1))
        self.pub_images = {
            cam: node.create_publisher(Image, topic, reliable_qos(2))
            for cam, topic in cfg.cameras.items()
        }
        node.create_subscription(
            String, cfg.new_episode_topic, self._on_new_episode, reliable_qos(10)
        )
        self.lockstep = bool(cfg.lockstep)
        self.stepper = LockstepStepper(arm) if cfg.lockstep else None
        self.stamp: float | None = None  # lock-step: stamp of the newest observation set
        self._sent_at = 0.0
        self.stale_commands = 0
        self.render_time = Durations()  # wall time to render every camera once
        if self.lockstep:
            node.create_timer(1.0 / node.cfg.publish_hz, self._lockstep_timer)
        else:
            node.create_timer(1.0 / node.cfg.publish_hz, self._publish)
            if cfg.cameras:
                node.create_timer(1.0 / cfg.camera_hz, self._render)
        log.info(
            "scene twin: objects on %s, cameras %s%s",
            cfg.objects_topic,
            cfg.cameras,
            " (lock-step: one simulator control step per command)" if self.lockstep else "",
        )

    # ---- lock-step ----------------------------------------------------------------------
    def command(self, msg: Any) -> bool:
        """A ``JointTrajectory`` for the lock-step twin: the action answering the newest set
        (same stamp) is applied and the physics advances one control step; False if ignored."""
        stamp = stamp_to_sec(msg.header.stamp)
        if self.stamp is None or abs(stamp - self.stamp) > 1e-6:
            self.stale_commands += 1
            if self.stale_commands == 50 and self.stepper.steps == 0:  # type: ignore[union-attr]  # lock-step
                log.warning(
                    "lock-step twin: 50 commands, none stamped with an observation set it sent; "
                    "the sender must run lock-step too (policy_client.lockstep: true)"
                )
            return False
        arm = self.arm
        try:
            q = trajectory_from_msg(msg, arm.joint_names, 0.0).positions[-1]
            finger = arm.gripper_joint_names[0]
            width = (
                2.0 * trajectory_from_msg(msg, [finger], 0.0).positions[-1, 0]
                if finger in msg.joint_names
                else None
            )
        except ConversionError as e:
            log.warning("lock-step: rejected command: %s", e)
            return False
        out = self.stepper.apply(q, width)  # type: ignore[union-attr]  # lock-step only
        if out.refused:
            log.warning("lock-step: command refused (%s); not stepping", ", ".join(out.events))
            return False
        self.publish_set()
        return True

    def publish_set(self, stamp: float | None = None) -> None:
        """One observation set under one stamp: scene report, objects, joints / gripper / pose,
        frames."""
        self.stamp = self.node.now() if stamp is None else stamp
        self._sent_at = (
            time.monotonic()
        )  # wall: lock-step waits on the policy's computation, not on robot time
        self._publish(self.stamp)
        self.node._publish(self.stamp)
        self._render(self.stamp)

    def _lockstep_timer(self) -> None:
        if self.stamp is not None and time.monotonic() - self._sent_at > _RESEND_S:
            self.publish_set(
                self.stamp
            )  # unanswered (lost, or the client is paused): again, same state
        else:
            self._publish_report()

    def _on_new_episode(self, msg: String) -> None:
        """``data``: the episode number wanted; repeats of a request already served are ignored
        (the task node re-sends until the scene reports it: a request may precede discovery)."""
        try:
            wanted = int(msg.data)
        except ValueError:
            wanted = self.backend.scene.episodes + 1
        if wanted <= self.backend.scene.episodes:
            self._publish_report() if self.lockstep else self._publish()
            return
        self.backend.new_episode(wanted)
        released = self.arm.release_limit_estop()
        if released is not None:
            log.warning(
                "episode %d: the scene reset the arm to its start pose; released the e-stop (%s)",
                wanted,
                released,
            )
        node = self.node
        for i, a in enumerate(node.arms):
            if a is self.arm:
                node.trajectories[i] = None
                node._gripper_cmd[i] = None
        self.arm.safety.forget_target()
        self.arm.settle()
        if self.stepper is not None:
            self.stepper.reset()
            self.publish_set()  # the reset observation: the episode's first action answers it
        else:
            self._publish()
        log.info(
            "scene episode %d: %r", self.backend.scene.episodes, self.backend.scene.instruction
        )

    def _report(self) -> dict[str, Any]:
        scene = self.backend.scene
        info = {
            "episode": scene.episodes,
            "instruction": scene.instruction,
            "success": scene.success(),
            "target": [float(x) for x in scene.target_position()],
        }
        if self.lockstep:
            st = self.stepper
            assert st is not None  # lock-step twins build their stepper in __init__
            info.update(
                success=st.success_step is not None, steps=st.steps, success_step=st.success_step
            )
        return info

    def _publish_report(self) -> None:
        with self.backend._lock:
            info = self._report()
        self.pub_scene.publish(String(data=json.dumps(info)))

    def _publish(self, stamp: float | None = None) -> None:
        scene = self.backend.scene
        with self.backend._lock:
            objects = world_to_base(self.backend, scene.object_positions())
            info = self._report()
        msg = PoseArray()
        msg.header.stamp = to_time_msg(self.node.now() if stamp is None else stamp)
        msg.header.frame_id = self.node.cfg.frame_id
        for p in objects:
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in p)
            pose.orientation.w = 1.0
            msg.poses.append(pose)  # type: ignore[attr-defined]  # a list at run time
        self.pub_objects.publish(msg)
        self.pub_scene.publish(String(data=json.dumps(info)))

    def _render(self, stamp: float | None = None) -> None:
        t0 = time.monotonic()
        for cam, pub in self.pub_images.items():
            frame = self.backend.render(cam, 0, 0)
            pub.publish(
                numpy_to_image(frame, "rgb8", self.node.now() if stamp is None else stamp, cam)
            )
        self.render_time.add(time.monotonic() - t0)
