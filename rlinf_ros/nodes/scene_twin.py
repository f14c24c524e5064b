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

from rlinf_ros.conversions import numpy_to_image, to_time_msg
from rlinf_ros.nodes.common import reliable_qos, sensor_qos

log = logging.getLogger(__name__)


def _world_to_base(backend: Any, points: np.ndarray) -> np.ndarray:
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
        self.pub_images = {cam: node.create_publisher(Image, topic, reliable_qos(2)) for cam, topic in cfg.cameras.items()}
        node.create_subscription(String, cfg.new_episode_topic, self._on_new_episode, reliable_qos(10))
        node.create_timer(1.0 / node.cfg.publish_hz, self._publish)
        if cfg.cameras:
            node.create_timer(1.0 / cfg.camera_hz, self._render)
        log.info("scene twin: objects on %s, cameras %s", cfg.objects_topic, cfg.cameras)

    def _on_new_episode(self, msg: String) -> None:
        """``data``: the episode number wanted; repeats of a request already served are ignored
        (the task node re-sends until the scene reports it: a request may precede discovery)."""
        try:
            wanted = int(msg.data)
        except ValueError:
            wanted = self.backend.scene.episodes + 1
        if wanted <= self.backend.scene.episodes:
            self._publish()
            return
        self.backend.new_episode(wanted)
        node = self.node
        for i, a in enumerate(node.arms):
            if a is self.arm:
                node.trajectories[i] = None
                node._gripper_cmd[i] = None
        self.arm.safety.forget_target()
        self.arm.settle()
        self._publish()
        log.info("scene episode %d: %r", self.backend.scene.episodes, self.backend.scene.instruction)

    def _publish(self) -> None:
        scene = self.backend.scene
        with self.backend._lock:
            objects = _world_to_base(self.backend, scene.object_positions())
            info = {"episode": scene.episodes, "instruction": scene.instruction, "success": scene.success(),
                    "target": [float(x) for x in scene.target_position()]}
        msg = PoseArray()
        msg.header.stamp = to_time_msg(time.time())
        msg.header.frame_id = self.node.cfg.frame_id
        for p in objects:
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in p)
            pose.orientation.w = 1.0
            msg.poses.append(pose)
        self.pub_objects.publish(msg)
        self.pub_scene.publish(String(data=json.dumps(info)))

    def _render(self) -> None:
        for cam, pub in self.pub_images.items():
            frame = self.backend.render(cam, 0, 0)
            pub.publish(numpy_to_image(frame, "rgb8", time.time(), cam))
