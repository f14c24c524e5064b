"""Typed config of the policy client node: the server it asks, the robot spec it speaks, its
secrets, real-time chunking and teleop takeover.

Why its own module: it is the largest node section of the graph YAML and the one the robot PC's
client reads alone (``rlinf_ros.nodes.policy_client``); :mod:`rlinf_ros.config` re-exports it
with the other node sections.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlinf_contracts.config import ConfigError
from rlinf_contracts.spec import RobotSpec, SpecError
from rlinf_ros.rtc import RtcConfig
from rlinf_ros.secrets import read_secret, reject_literal

API_KEY_ENV = "RLINF_API_KEY"  # what `rlinf serve` reads too


# The joint-delta layout of the first policy client, kept as the default so a config without
# a robot_spec still describes something real: 7 joints + gripper width per arm, 8-D actions.
JOINT_DELTA_SPEC = {
    "state": [["joint_pos", 7], ["gripper_width", 1]],
    "action": {"control": "joint_delta", "dim": 8, "joint_scale": 0.05},
}


@dataclass
class PolicyClientConfig:
    enabled: bool = field(
        default=True, metadata={"help": "start this node (a section that is absent is off)"}
    )
    name: str = "policy_client"
    namespace: str = ""
    server_url: str = field(
        default="ws://127.0.0.1:8000", metadata={"help": "policy server (wire)"}
    )
    api_key: str = field(
        default="",
        metadata={
            "help": "refused if set: a literal key would be a ROS parameter; use api_key_file or "
            "api_key_env"
        },
    )
    api_key_file: str = field(
        default="",
        metadata={
            "help": "file holding the key of a server that requires one (a Docker / k8s secret; "
            "read at start)"
        },
    )
    api_key_env: str = field(
        default=API_KEY_ENV,
        metadata={
            "help": "environment variable holding the key, or <it>_FILE naming a file (default "
            f"{API_KEY_ENV}); '' = no key unless api_key_file"
        },
    )
    robot_spec: dict[str, Any] = field(
        default_factory=lambda: dict(JOINT_DELTA_SPEC),
        metadata={
            "help": "this robot's observation/action contract (rlinf_contracts.spec.RobotSpec as "
            "a map; `rlinf spec ENV_OR_CHECKPOINT` prints one); the server refuses a "
            "policy trained for another"
        },
    )
    control_hz: float = field(
        default=0.0, metadata={"help": "control rate; 0 = the robot spec's control_hz"}
    )
    slop_s: float = field(
        default=0.05, metadata={"help": "max stamp spread of one synchronised observation"}
    )
    max_obs_age_s: float = field(
        default=0.5, metadata={"help": "older observations are not sent; hold"}
    )
    reuse_observation: bool = field(
        default=True,
        metadata={
            "help": "a tick without a newer synchronised set re-sends the newest one (if younger "
            "than max_obs_age_s)"
        },
    )
    cameras: dict[str, str] = field(
        default_factory=lambda: {"camera": "camera/camera/color/image_raw"},
        metadata={"help": "observation image name -> Image topic"},
    )
    joint_states_topic: str = "joint_states"
    gripper_joint_states_topic: str = "franka_gripper/joint_states"
    ee_pose_topics: list[str] = field(
        default_factory=lambda: ["franka_robot_state_broadcaster/current_pose"],
        metadata={"help": "PoseStamped of each arm's end effector (base frame)"},
    )
    target_pose_topics: list[str] = field(
        default_factory=lambda: ["cartesian_impedance_controller/target_pose"],
        metadata={
            "help": "ee_impedance specs: PoseStamped impedance target out, one per arm (the "
            "robot node's target_pose topic); the gripper still goes out on command_topic"
        },
    )
    goal_topic: str = field(
        default="task/goal",
        metadata={
            "help": "PoseStamped goal (base frame) for specs with goal features, e.g. the reach "
            "target"
        },
    )
    object_topic: str = field(
        default="task/object_pose", metadata={"help": "PoseStamped object pose (base frame)"}
    )
    objects_topic: str = field(
        default="sim/objects",
        metadata={
            "help": "PoseArray of a scene's object slots (base frame), for obj<i>_minus_ee features"
        },
    )
    command_topic: str = "joint_trajectory_controller/joint_trajectory"
    status_topic: str = "policy_client/status"
    enable_service: str = field(
        default="policy_client/enable",
        metadata={
            "help": "std_srvs/SetBool: false pauses (no commands), true starts a new episode"
        },
    )
    joint_prefixes: list[str] = field(
        default_factory=lambda: ["panda_"],
        metadata={"help": "one per arm; joints <prefix>joint1..7"},
    )
    instruction: str = field(
        default="",
        metadata={
            "help": "task instruction sent as 'instruction' in every observation ('' = "
            "robot_spec.instruction); each String on instruction_topic replaces it"
        },
    )
    instruction_topic: str = field(
        default="task/instruction",
        metadata={
            "help": "std_msgs/String: the current task instruction (the twin's task node sets "
            "one per episode); '' = none"
        },
    )
    infer_timeout_s: float = 2.0
    max_wait_fraction: float = field(
        default=0.6,
        metadata={
            "help": "a tick with nothing to execute waits this fraction of a period for the answer"
        },
    )
    reconnect_s: float = field(
        default=0.5, metadata={"help": "pause between reconnection attempts"}
    )
    step_topic: str = field(
        default="policy_client/step",
        metadata={
            "help": "StepRecord (wire bytes in std_msgs/UInt8MultiArray) per commanded tick; '' "
            "= none"
        },
    )
    robot_state_topic: str = field(
        default="franka_robot_state_broadcaster/robot_state",
        metadata={
            "help": "robot_state JSON; while an arm is e-stopped or in error the client commands "
            "nothing"
        },
    )
    teleop_topic: str = field(
        default="teleop/command",
        metadata={
            "help": "TeleopCommand JSON; while its intervention flag is held the human's action "
            "is executed"
        },
    )
    event_topic: str = field(
        default="episode/event", metadata={"help": "EpisodeEvent JSON; 'begin' starts an episode"}
    )
    teleop_timeout_s: float = field(
        default=0.3, metadata={"help": "a teleop command older than this is ignored"}
    )
    rtc: RtcConfig = field(
        default_factory=RtcConfig,
        metadata={
            "help": "real-time chunking: request early, freeze the executed steps, blend / "
            "inpaint the overlap"
        },
    )
    lockstep: bool = field(
        default=False,
        metadata={
            "help": "with a lock-step sim twin (robot.scene.lockstep): act once per new "
            "observation set (joints, gripper, pose, objects, cameras under one stamp), "
            "wait for the answer, stamp the command with the observation's stamp, never "
            "send holds; a real robot runs with false"
        },
    )

    def spec(self) -> RobotSpec:
        """The robot spec, validated; errors name ``policy_client.robot_spec``."""
        try:
            spec = RobotSpec.from_dict(self.robot_spec)
        except SpecError as e:
            raise ConfigError(f"key 'policy_client.robot_spec': {e}") from None
        if spec.arms != len(self.joint_prefixes):
            raise ConfigError(
                f"key 'policy_client.robot_spec.arms' is {spec.arms} but "
                f"policy_client.joint_prefixes lists {len(self.joint_prefixes)} arm(s)"
            )
        if spec.action.control == "ee_impedance":
            if self.lockstep:
                raise ConfigError(
                    "keys 'policy_client.lockstep' and 'policy_client.robot_spec.action.control'"
                    " = ee_impedance exclude each other: a lock-step twin steps joint targets"
                )
            if len(self.target_pose_topics) < spec.arms:
                raise ConfigError(
                    f"key 'policy_client.target_pose_topics' lists "
                    f"{len(self.target_pose_topics)} topic(s); ee_impedance needs one per arm "
                    f"({spec.arms})"
                )
        return spec

    def validate(self) -> None:
        reject_literal(
            "policy_client.api_key",
            self.api_key,
            "policy_client.api_key_file",
            "policy_client.api_key_env",
            API_KEY_ENV,
        )

    def resolved_api_key(self) -> str | None:
        """The key from ``api_key_file``, else ``$<api_key_env>_FILE``, else ``$<api_key_env>``
        (never a ROS parameter: :mod:`rlinf_ros.secrets`)."""
        return read_secret("policy_client.api_key_file", self.api_key_file, self.api_key_env)

    @property
    def rate_hz(self) -> float:
        return self.control_hz or self.spec().control_hz

    @property
    def teleop_only(self) -> bool:
        """No server: the client executes teleop commands only (demonstration collection)."""
        return not self.server_url
