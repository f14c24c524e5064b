"""Typed config of the robot-PC nodes of the online loop: streamer, recorder, teleop.

Kept beside ``rlinf_ros.config`` (which holds the graph and the control nodes) so each stays
short; ``RosGraphConfig`` has one section per node kind (``streamer:``, ``recorder:``,
``teleop:``), all off unless ``enabled: true``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from rlinf_ros.streaming import TOKEN_ENV, StreamerConfig

STEP_TOPIC = "policy_client/step"
EVENT_TOPIC = "episode/event"
TELEOP_TOPIC = "teleop/command"


@dataclass
class EpisodeSourceConfig:
    """What the recorder and the streamer both listen to and how they label episodes."""

    step_topic: str = field(
        default=STEP_TOPIC, metadata={"help": "StepRecord (wire bytes) from the policy client"}
    )
    event_topic: str = field(
        default=EVENT_TOPIC, metadata={"help": "EpisodeEvent JSON (task node, teleop keys)"}
    )
    task: str = field(
        default="", metadata={"help": "episode task name; '' = the policy client's robot spec task"}
    )
    source: str = field(default="online", metadata={"help": "demo | online | intervention | eval"})
    success_reward: float = field(
        default=1.0, metadata={"help": "reward of the last step of a success"}
    )
    judge_topic: str = field(
        default="reward/judge",
        metadata={
            "help": "the reward node's error-rate reports (JSON, one per window): the newest "
            "rides in the next episode's info extra as 'reward_judge' (the learner logs it); "
            "'' = none"
        },
    )


@dataclass
class StreamerNodeConfig:
    enabled: bool = field(default=False, metadata={"help": "start the transition streamer node"})
    name: str = "streamer"
    namespace: str = ""
    episodes: EpisodeSourceConfig = field(default_factory=EpisodeSourceConfig)
    stream: StreamerConfig = field(default_factory=StreamerConfig)
    status_topic: str = field(
        default="streamer/status", metadata={"help": "JSON: backlog, acked, connected"}
    )
    token_file: str = field(
        default="", metadata={"help": "file holding the ingest token (read at start)"}
    )
    token_env: str = field(
        default=TOKEN_ENV,
        metadata={
            "help": "environment variable holding the ingest token, or <it>_FILE naming a file "
            f"(default {TOKEN_ENV})"
        },
    )

    def token_source(self) -> str:
        """Where :meth:`resolved_stream` takes the token from, as a user sets it (no value)."""
        from rlinf_ros.secrets import FILE_SUFFIX

        if self.stream.token:
            return "streamer.stream.token"
        if self.token_file:
            return f"streamer.token_file {self.token_file}"
        if os.environ.get(self.token_env + FILE_SUFFIX):
            return f"${self.token_env}{FILE_SUFFIX}"
        return f"${self.token_env}"

    def resolved_stream(self) -> StreamerConfig:
        """``stream`` with its token read from ``token_file``, else ``$<token_env>_FILE``, else
        ``$<token_env>`` (a ``stream.token`` in the YAML is used as is; it is never a ROS
        parameter)."""
        from rlinf_contracts.config import ConfigError
        from rlinf_ros.secrets import FILE_SUFFIX, read_secret

        if self.stream.token:
            return self.stream
        token = read_secret("streamer.token_file", self.token_file, self.token_env)
        if not token:
            raise ConfigError(
                f"no ingest token: set 'streamer.token_file', or export {self.token_env} or "
                f"{self.token_env}{FILE_SUFFIX} (key 'streamer.token_env' names the variable)"
            )
        return dataclasses.replace(self.stream, token=token)


@dataclass
class RecorderNodeConfig:
    enabled: bool = field(default=False, metadata={"help": "start the recorder node"})
    name: str = "recorder"
    namespace: str = ""
    episodes: EpisodeSourceConfig = field(
        default_factory=lambda: EpisodeSourceConfig(source="demo")
    )
    store: str = field(default="runs/demos", metadata={"help": "episode store directory"})
    keep_aborted: bool = field(
        default=False, metadata={"help": "keep re-recorded (aborted) episodes"}
    )
    status_topic: str = field(
        default="recorder/status", metadata={"help": "JSON: episodes, success rate..."}
    )
    status_path: str = field(
        default="", metadata={"help": "also write the status JSON here (rlinf collect reads it)"}
    )
    format: str = field(
        default="store",
        metadata={
            "help": "store | mcap | both: the episode store, a rosbag2 MCAP folder (one file "
            "per episode, ROS 2 tools and 'rlinf convert' read it), or both"
        },
    )
    mcap_dir: str = field(
        default="runs/bags", metadata={"help": "rosbag2 folder of the MCAP recording"}
    )
    mcap_chunk_kib: int = field(
        default=1024,
        metadata={"help": "MCAP chunk size: a killed recorder loses at most the last chunk"},
    )

    def validate(self) -> None:
        from rlinf_contracts.config import ConfigError

        if self.format not in RECORDER_FORMATS:
            raise ConfigError(
                f"key 'recorder.format' must be one of {list(RECORDER_FORMATS)}, got "
                f"{self.format!r}"
            )
        if self.format != "store" and not self.mcap_dir:
            raise ConfigError(f"key 'recorder.mcap_dir' is empty; format {self.format!r} needs it")
        if self.mcap_chunk_kib < 1:
            raise ConfigError(
                f"key 'recorder.mcap_chunk_kib' must be >= 1, got {self.mcap_chunk_kib}"
            )


# what the recorder writes: the sinks of each (rlinf_ros.nodes.recorder.SINKS)
RECORDER_FORMATS = ("store", "mcap", "both")


@dataclass
class TeleopNodeConfig:
    enabled: bool = field(default=False, metadata={"help": "start the teleop node"})
    name: str = "teleop"
    namespace: str = ""
    device: str = field(
        default="keyboard",
        metadata={
            "help": "keyboard | spacemouse | gamepad | leader | scripted (rlinf_ros.teleop.DEVICES)"
        },
    )
    rate_hz: float = field(default=20.0, metadata={"help": "command rate"})
    command_topic: str = field(default=TELEOP_TOPIC, metadata={"help": "TeleopCommand JSON out"})
    event_topic: str = field(default=EVENT_TOPIC, metadata={"help": "EpisodeEvent JSON out (keys)"})
    always_intervene: bool = field(
        default=False,
        metadata={
            "help": "teleop-only demos: the human always drives (no policy); else only while the "
            "flag is held"
        },
    )
    pos_speed: float = field(
        default=1.0, metadata={"help": "translation input scale (fraction of full action)"}
    )
    rot_speed: float = field(default=1.0, metadata={"help": "rotation input scale"})
    leader_topic: str = field(
        default="leader/joint_states", metadata={"help": "leader arm JointState (device leader)"}
    )
    joint_prefix: str = "panda_"
    script: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "scripted device settings (see rlinf_ros.teleop.scripted)"},
    )

    def validate(self) -> None:
        # checked by name, not by importing: a device's module imports its hardware library
        # (hidapi, pygame, evdev), which only the node that drives it needs
        from rlinf_contracts.config import ConfigError
        from rlinf_contracts.registry import did_you_mean

        if self.device not in TELEOP_DEVICES:
            raise ConfigError(
                f"key 'teleop.device' must be one of {list(TELEOP_DEVICES)}, got "
                f"{self.device!r}{did_you_mean(self.device, TELEOP_DEVICES)}"
            )
        if self.rate_hz <= 0:
            raise ConfigError(f"key 'teleop.rate_hz' must be > 0, got {self.rate_hz}")


# the modules of rlinf_ros.teleop that register a device under their own name
TELEOP_DEVICES = ("keyboard", "spacemouse", "gamepad", "leader", "scripted")


REWARD_SOURCES = ("classifier", "events")
ON_REJECT = ("end", "continue")  # what an operator's rejection of a classifier success does


@dataclass
class RewardNodeConfig:
    """The reward node (``rlinf_ros.nodes.reward``): one reward topic whatever the source."""

    enabled: bool = field(default=False, metadata={"help": "start the reward node"})
    name: str = "reward"
    namespace: str = ""
    source: str = field(
        default="classifier",
        metadata={
            "help": "classifier (a served success classifier on the camera) | events (the sim "
            "twin's success flag or the human's success / failure keys, from "
            "episode/event)"
        },
    )
    server_url: str = field(
        default="ws://127.0.0.1:8200",
        metadata={
            "help": "classifier: `rlinf serve --checkpoint runs/reward_classifier --port 8200` "
            "on the GPU box"
        },
    )
    image_topic: str = field(
        default="camera/camera/color/image_raw", metadata={"help": "classifier: Image in"}
    )
    camera: str = field(
        default="", metadata={"help": "classifier: the served camera name ('' = its first)"}
    )
    threshold: float = field(default=0.5, metadata={"help": "p_success above this is a success"})
    consecutive: int = field(
        default=2, metadata={"help": "successive successful frames before success is reported"}
    )
    rate_hz: float = field(default=10.0, metadata={"help": "classifier: frames scored per second"})
    timeout_s: float = field(default=2.0, metadata={"help": "classifier: per-request timeout"})
    end_episode: bool = field(
        default=False,
        metadata={
            "help": "classifier: publish an EpisodeEvent end (success) on episode/event when "
            "success is reported"
        },
    )
    begin_episode: bool = field(
        default=True,
        metadata={
            "help": "classifier, end_episode: also publish an EpisodeEvent begin right after the "
            "end (the next episode starts at once, as after a human key); false where a task "
            "node resets the scene and starts the next episode (the sim twin)"
        },
    )
    judge_topic: str = field(
        default="",
        metadata={
            "help": "classifier: std_msgs/Float64 success flag of a judge that is not the reward "
            "(the sim twin's task/reward); each scored frame is paired with it for the "
            "classifier's false-positive / false-negative rates. '' = no judge (a real bench)"
        },
    )
    judge_window: int = field(
        default=200,
        metadata={
            "help": "classifier with a judge: scored frames per error-rate report (one JSON on "
            "judge_stats_topic and one log line per window)"
        },
    )
    judge_stats_topic: str = field(
        default="reward/judge",
        metadata={
            "help": "std_msgs/String JSON per window: n, judge_pos, judge_neg, false_pos, "
            "false_neg, fp_rate, fn_rate, window (the streamer forwards it to the learner)"
        },
    )
    confirm: str = field(
        default="",
        metadata={
            "help": "classifier, end_episode: who confirms the classifier's success before it is a "
            "reward: '' = nobody (it stands) | judge (the sim twin's operator: its success flag "
            "of that moment, judge_topic). Rejected, the episode ends as a failure (truncated, "
            "reason operator) and the scene is reset"
        },
    )
    corrections_dir: str = field(
        default="",
        metadata={
            "help": "an episode store that keeps the frames of each operator's verdict (with "
            "confirm: the consecutive frames that fired, labelled by the verdict; and the frames "
            "before a success key the classifier missed, as positives), for `rlinf train "
            "configs/reward_classifier_push.yaml data.extra_stores=[..., DIR]`; '' = not kept"
        },
    )
    on_reject: str = field(
        default="end",
        metadata={
            "help": "with confirm: what the operator's rejection does: end (the episode ends as a "
            "failure, the scene is reset) | continue (reward 0, the episode goes on: 'not yet')"
        },
    )
    catch_missed: int = field(
        default=0,
        metadata={
            "help": "with confirm: the operator's success key on what the classifier misses: "
            "once the confirmer has seen success on this many scored frames in a row of an "
            "episode the classifier left open, the episode ends in success (reason operator) and "
            "its frames are kept as a positive; 0 = the operator answers the classifier only"
        },
    )
    reward_topic: str = field(
        default="reward", metadata={"help": "std_msgs/Float64 reward (RosRobotEnv reads it)"}
    )
    success_topic: str = field(default="reward/success", metadata={"help": "std_msgs/Bool"})
    probability_topic: str = field(
        default="reward/p_success", metadata={"help": "classifier: std_msgs/Float64"}
    )
    event_topic: str = field(
        default=EVENT_TOPIC, metadata={"help": "EpisodeEvent JSON in (events) / out (end_episode)"}
    )

    def validate(self) -> None:
        from rlinf_contracts.config import ConfigError

        if self.source not in REWARD_SOURCES:
            raise ConfigError(
                f"key 'reward.source' must be one of {REWARD_SOURCES}, got {self.source!r}"
            )
        if self.consecutive < 1 or self.rate_hz <= 0:
            raise ConfigError("keys 'reward.consecutive' >= 1 and 'reward.rate_hz' > 0")
        if self.judge_window < 1:
            raise ConfigError(f"key 'reward.judge_window' must be >= 1, got {self.judge_window}")
        self._validate_confirm()

    def _validate_confirm(self) -> None:
        from rlinf_contracts.config import ConfigError
        from rlinf_contracts.registry import did_you_mean
        from rlinf_ros.reward_corrections import CONFIRMERS

        if self.confirm and self.confirm not in CONFIRMERS:
            raise ConfigError(
                f"key 'reward.confirm' must be '' or one of {sorted(CONFIRMERS)}, got "
                f"{self.confirm!r}{did_you_mean(self.confirm, CONFIRMERS)}"
            )
        if self.confirm and (self.source != "classifier" or not self.end_episode):
            raise ConfigError(
                "key 'reward.confirm' confirms the classifier's episode ends: it needs "
                "reward.source=classifier and reward.end_episode=true"
            )
        if self.confirm == "judge" and not self.judge_topic:
            raise ConfigError(
                "key 'reward.confirm' is 'judge' but 'reward.judge_topic' is empty: name the "
                "twin's success flag (task/reward)"
            )
        if self.on_reject not in ON_REJECT:
            raise ConfigError(
                f"key 'reward.on_reject' must be one of {list(ON_REJECT)}, got "
                f"{self.on_reject!r}{did_you_mean(self.on_reject, ON_REJECT)}"
            )
        if self.catch_missed < 0:
            raise ConfigError(
                f"key 'reward.catch_missed' is a frame count >= 0, got {self.catch_missed}"
            )
        if self.catch_missed and not self.confirm:
            raise ConfigError(
                "key 'reward.catch_missed' has the operator (reward.confirm) press the success "
                "key: set reward.confirm too"
            )
