"""Typed config of the robot-PC nodes of the online loop: streamer, recorder, teleop.

Kept beside ``rlinf_ros.config`` (which holds the graph and the control nodes) so each stays
short; ``RosGraphConfig`` has one section per node kind (``streamer:``, ``recorder:``,
``teleop:``), all off unless ``enabled: true``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlinf_ros.streaming import StreamerConfig

STEP_TOPIC = "policy_client/step"
EVENT_TOPIC = "episode/event"
TELEOP_TOPIC = "teleop/command"


@dataclass
class EpisodeSourceConfig:
    """What the recorder and the streamer both listen to and how they label episodes."""

    step_topic: str = field(default=STEP_TOPIC, metadata={"help": "StepRecord (wire bytes) from the policy client"})
    event_topic: str = field(default=EVENT_TOPIC, metadata={"help": "EpisodeEvent JSON (task node, teleop keys)"})
    task: str = field(default="", metadata={"help": "episode task name; '' = the policy client's robot spec task"})
    source: str = field(default="online", metadata={"help": "demo | online | intervention | eval"})
    success_reward: float = field(default=1.0, metadata={"help": "reward of the last step of a success"})


@dataclass
class StreamerNodeConfig:
    enabled: bool = field(default=False, metadata={"help": "start the transition streamer node"})
    name: str = "streamer"
    namespace: str = ""
    episodes: EpisodeSourceConfig = field(default_factory=EpisodeSourceConfig)
    stream: StreamerConfig = field(default_factory=StreamerConfig)
    status_topic: str = field(default="streamer/status", metadata={"help": "JSON: backlog, acked, connected"})


@dataclass
class RecorderNodeConfig:
    enabled: bool = field(default=False, metadata={"help": "start the recorder node"})
    name: str = "recorder"
    namespace: str = ""
    episodes: EpisodeSourceConfig = field(default_factory=lambda: EpisodeSourceConfig(source="demo"))
    store: str = field(default="runs/demos", metadata={"help": "episode store directory"})
    keep_aborted: bool = field(default=False, metadata={"help": "keep re-recorded (aborted) episodes"})
    status_topic: str = field(default="recorder/status", metadata={"help": "JSON: episodes, success rate..."})
    status_path: str = field(default="", metadata={"help": "also write the status JSON here (rlinf collect reads it)"})


@dataclass
class TeleopNodeConfig:
    enabled: bool = field(default=False, metadata={"help": "start the teleop node"})
    name: str = "teleop"
    namespace: str = ""
    device: str = field(default="keyboard", metadata={
        "help": "keyboard | spacemouse | gamepad | leader | scripted (rlinf_ros.teleop.DEVICES)"})
    rate_hz: float = field(default=20.0, metadata={"help": "command rate"})
    command_topic: str = field(default=TELEOP_TOPIC, metadata={"help": "TeleopCommand JSON out"})
    event_topic: str = field(default=EVENT_TOPIC, metadata={"help": "EpisodeEvent JSON out (keys)"})
    always_intervene: bool = field(default=False, metadata={
        "help": "teleop-only demos: the human always drives (no policy); else only while the flag is held"})
    pos_speed: float = field(default=1.0, metadata={"help": "translation input scale (fraction of full action)"})
    rot_speed: float = field(default=1.0, metadata={"help": "rotation input scale"})
    leader_topic: str = field(default="leader/joint_states", metadata={"help": "leader arm JointState (device leader)"})
    joint_prefix: str = "panda_"
    script: dict[str, Any] = field(default_factory=dict, metadata={"help": "scripted device settings (see rlinf_ros.teleop.scripted)"})
