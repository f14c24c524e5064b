"""Typed config of a ROS 2 node graph: one YAML drives ``rlinf ros up`` and the launch files.

Topic names are relative (namespace-able) and default to franka_ros2 / realsense2_camera
conventions (REFERENCE.md §2-3). Services are ``std_srvs/Trigger`` because franka_msgs /
control_msgs actions are not available as wheels here: ``estop``, ``reset_estop``,
``error_recovery``, and the gripper's ``homing`` / ``open`` / ``grasp`` / ``stop``.

Gripper convention (as franka_gripper publishes it): joints ``<prefix>finger_joint1/2`` each at
half the opening width. A JointTrajectory that includes ``<prefix>finger_joint1`` also commands
the gripper, so one message moves arm and gripper together (one or two arms alike).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlinf_contracts.config import ConfigError, from_dict, load_config
from rlinf_contracts.impedance import ImpedanceGains
from rlinf_contracts.spec import RobotSpec
from rlinf_ros.online_config import (
    RecorderNodeConfig,
    RewardNodeConfig,
    StreamerNodeConfig,
    TeleopNodeConfig,
)
from rlinf_ros.policy_client_config import PolicyClientConfig
from rlinf_ros.secrets import reject_secret_overrides
from robot_drivers.bridge_controllers import LEGACY_COMMANDS, BridgeController, bridge_controller
from robot_drivers.cameras import CameraConfig
from robot_drivers.factory import ArmConfig


@dataclass
class RobotTopics:
    joint_states: str = field(
        default="joint_states", metadata={"help": "sensor_msgs/JointState out"}
    )
    gripper_joint_states: str = field(
        default="franka_gripper/joint_states", metadata={"help": "finger joints out"}
    )
    ee_pose: str = field(
        default="franka_robot_state_broadcaster/current_pose", metadata={"help": "PoseStamped out"}
    )
    robot_state: str = field(
        default="franka_robot_state_broadcaster/robot_state",
        metadata={"help": "std_msgs/String JSON: mode, errors, e-stop, safety counters"},
    )
    joint_trajectory: str = field(
        default="joint_trajectory_controller/joint_trajectory",
        metadata={"help": "trajectory_msgs/JointTrajectory in"},
    )
    target_pose: str = field(
        default="cartesian_impedance_controller/target_pose",
        metadata={
            "help": "geometry_msgs/PoseStamped target in (IK to joints; ee_impedance arms: the "
            "torque loop's impedance target)"
        },
    )


BRIDGE_COMMANDS = ("joint_trajectory", "cartesian_pose")


@dataclass
class BridgeConfig:
    """Topics of the stack a bridged arm (``robot.arms[0].backend: bridge``) sits on."""

    joint_states: str = field(
        default="/joint_states", metadata={"help": "the stack's sensor_msgs/JointState"}
    )
    ee_pose: str = field(
        default="",
        metadata={
            "help": "the stack's EE PoseStamped (franka_ros2: "
            "/franka_robot_state_broadcaster/current_pose); '' = forward kinematics "
            "(Panda / FR3) or none"
        },
    )
    gripper_joint_states: str = field(
        default="", metadata={"help": "finger JointState (width = 2 x finger 1); ''"}
    )
    command: str = field(
        default="joint_trajectory",
        metadata={"help": "joint_trajectory | cartesian_pose (older spelling of 'target')"},
    )
    target: str = field(
        default="",
        metadata={
            "help": "the controller the bridge drives, by name (robot_drivers.bridge_controllers:"
            " franka_joint_trajectory | franka_cartesian_pose | franka_cartesian_impedance | "
            "crisp_cartesian_impedance); '' = from 'command'"
        },
    )
    namespace: str = field(
        default="", metadata={"help": "namespace of the controller's node, topics and services"}
    )
    controller: str = field(
        default="",
        metadata={
            "help": "node name of the controller ('' = the target's usual name, e.g. "
            "joint_trajectory_controller: commands go to /<controller>/joint_trajectory)"
        },
    )
    impedance: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "gains set on a compliant target's parameters at start (ImpedanceGains keys;"
            " the robot spec's action.impedance, unset keys = its defaults)"
        },
    )
    parameter_timeout_s: float = field(
        default=10.0, metadata={"help": "wait for the controller's parameter services"}
    )
    target_pose: str = field(
        default="/cartesian_impedance_controller/target_pose",
        metadata={"help": "cartesian_pose mode: the controller's PoseStamped target topic"},
    )
    gripper_command: str = field(
        default="",
        metadata={
            "help": "JointTrajectory topic for the finger joint ('' = gripper commands are "
            "dropped, with a warning)"
        },
    )
    point_time_s: float = field(
        default=0.0, metadata={"help": "time_from_start of each command; 0 = 2 driver periods"}
    )
    frame_id: str = field(default="base", metadata={"help": "frame of the Cartesian target"})

    def validate(self) -> None:
        if self.command not in BRIDGE_COMMANDS:
            raise ConfigError(
                f"key 'robot.bridge.command' must be one of {BRIDGE_COMMANDS}, got {self.command!r}"
            )
        self.target_controller().gain_values(self.gains())

    def target_controller(self) -> BridgeController:
        """The registered target (``target``, else the one ``command`` names)."""
        return bridge_controller(self.target or LEGACY_COMMANDS[self.command])

    def gains(self) -> ImpedanceGains:
        return ImpedanceGains.from_dict(self.impedance, prefix="robot.bridge.impedance")

    def check_spec(self, spec: RobotSpec) -> None:
        """An ``ee_impedance`` spec needs a pose target, and a compliant one its gains."""
        action, target = spec.action, self.target_controller()
        if action.control != "ee_impedance":
            return
        if target.command != "pose":
            raise ConfigError(
                f"key 'robot.bridge.target': {target.name!r} takes joint trajectories; the robot "
                "spec's ee_impedance needs a Cartesian target (e.g. crisp_cartesian_impedance)"
            )
        gains = self.gains()
        if target.takes_gains and action.impedance != gains:
            want, got = (action.impedance or ImpedanceGains()).to_dict(), gains.to_dict()
            diff = {k: (want[k], got[k]) for k in want if want[k] != got[k]}
            raise ConfigError(
                "keys 'policy_client.robot_spec.action.impedance' and 'robot.bridge.impedance' "
                f"differ (spec, bridge): {diff}; the controller must get the spec's gains"
            )


@dataclass
class SceneTwinConfig:
    """Topics of a twin whose arm runs a simulator scene (``robot.arms[*].scene``;
    rlinf_ros.nodes.scene_twin)."""

    cameras: dict[str, str] = field(
        default_factory=dict,
        metadata={
            "help": "scene camera -> sensor_msgs/Image topic, rendered as the simulator renders "
            "observations"
        },
    )
    camera_hz: float = field(default=10.0, metadata={"help": "scene camera frame rate"})
    objects_topic: str = field(
        default="sim/objects", metadata={"help": "PoseArray of the object slots (base frame)"}
    )
    scene_topic: str = field(
        default="sim/scene", metadata={"help": "JSON {episode, instruction, success, target}"}
    )
    new_episode_topic: str = field(
        default="sim/new_episode", metadata={"help": "String: reset the scene's episode"}
    )
    lockstep: bool = field(
        default=False,
        metadata={
            "help": "validate a checkpoint: each command (stamped with the observation it "
            "answers) advances the physics exactly one simulator control step, then "
            "joints, pose, objects and camera go out under one stamp; no wall-clock "
            "physics (pair with policy_client.lockstep)"
        },
    )


SIM_BACKENDS = (
    "sim",
    "kinematic",
)  # arms whose physics this process steps: they can own simulated time


@dataclass
class RobotNodeConfig:
    enabled: bool = field(
        default=True, metadata={"help": "start this node (false: robot driven elsewhere)"}
    )
    name: str = "robot"
    namespace: str = ""
    arms: list[ArmConfig] = field(default_factory=lambda: [ArmConfig()])
    driver_hz: float = field(
        default=100.0, metadata={"help": "driver tick (physics, watchdog, trajectories)"}
    )
    publish_hz: float = field(
        default=50.0, metadata={"help": "joint state / pose publication rate"}
    )
    state_hz: float = field(default=5.0, metadata={"help": "robot_state JSON rate"})
    frame_id: str = "base"
    grasp_width: float = 0.0
    grasp_force: float = 20.0
    topics: RobotTopics = field(default_factory=RobotTopics)
    bridge: BridgeConfig = field(
        default_factory=BridgeConfig,
        metadata={"help": "bridge mode (an arm with backend: bridge): the existing stack's topics"},
    )
    scene: SceneTwinConfig = field(
        default_factory=SceneTwinConfig,
        metadata={
            "help": "a simulated arm with a scene (arms[*].scene): its camera / object / episode "
            "topics"
        },
    )
    sim_clock: bool = field(
        default=False,
        metadata={
            "help": "simulated arms only: publish /clock (physics steps x timestep, one driver "
            "period per tick) and run the arms' safety clock on it; pair with "
            "use_sim_time: true"
        },
    )
    real_time_factor: float = field(
        default=1.0,
        metadata={
            "help": "sim_clock: simulated seconds per wall second the driver aims at (< 1 leaves "
            "CPU headroom)"
        },
    )

    def validate(self) -> None:
        self.bridge.validate()
        if self.sim_clock and self.scene.lockstep:
            raise ConfigError(
                "keys 'robot.sim_clock' and 'robot.scene.lockstep' exclude each other: a lock-step "
                "twin's time advances only per applied action; use one or the other"
            )
        if self.sim_clock and any(a.backend not in SIM_BACKENDS for a in self.arms):
            raise ConfigError(
                f"key 'robot.sim_clock' needs simulated arms (backend in {SIM_BACKENDS}), got "
                f"{[a.backend for a in self.arms]}; a real arm runs on wall time"
            )
        if not 0 < self.real_time_factor <= 1.0:
            raise ConfigError(
                f"key 'robot.real_time_factor' must be in (0, 1], got {self.real_time_factor}"
            )
        if len(self.arms) not in (1, 2):
            raise ConfigError(f"key 'robot.arms' must list 1 or 2 arms, got {len(self.arms)}")
        prefixes = [a.joint_prefix for a in self.arms]
        if len(set(prefixes)) != len(prefixes):
            raise ConfigError(
                f"key 'robot.arms[*].joint_prefix' must differ between arms, got {prefixes}"
            )


@dataclass
class CameraNodeConfig:
    name: str = "camera"
    namespace: str = ""
    camera: CameraConfig = field(default_factory=CameraConfig)
    image_topic: str = field(
        default="camera/camera/color/image_raw", metadata={"help": "sensor_msgs/Image out"}
    )
    info_topic: str = field(
        default="camera/camera/color/camera_info", metadata={"help": "CameraInfo out"}
    )
    encoding: str = field(default="rgb8", metadata={"help": "rgb8 | bgr8 | mono8 ..."})
    frame_id: str = "camera_color_optical_frame"
    mirror_joint_states: str = field(
        default="joint_states", metadata={"help": "sim only: joint topic the rendered arm mirrors"}
    )
    joint_prefix: str = "panda_"


@dataclass
class TaskNodeConfig:
    """The simulated twin's episode judge (``rlinf_ros.nodes.task``): homes the arm, publishes a
    goal, lets the policy client run, scores success. Defaults are the MuJoCo reach task's."""

    enabled: bool = field(
        default=False, metadata={"help": "start the task node (sim twin evaluation)"}
    )
    name: str = "task"
    namespace: str = ""
    task: str = field(
        default="reach", metadata={"help": "registered episode judge (rlinf_ros.episodes.JUDGES)"}
    )
    episodes: int = field(
        default=20,
        metadata={
            "help": "episodes to run, then idle (`rlinf ros up` stops the graph once "
            "task.results_path is written); 0 = run forever"
        },
    )
    max_steps: int = field(
        default=50, metadata={"help": "control steps per episode (the sim task's episode length)"}
    )
    control_hz: float = field(
        default=20.0, metadata={"help": "rate the steps are counted at (the spec's control_hz)"}
    )
    success_radius: float = field(default=0.05, metadata={"help": "m, end effector to goal"})
    goal_center: list[float] = field(
        default_factory=lambda: [-0.05, 0.0, 0.2],
        metadata={"help": "goal sampling box centre, policy (world) frame"},
    )
    goal_half: list[float] = field(
        default_factory=lambda: [0.15, 0.2, 0.12], metadata={"help": "box half sizes"}
    )
    base_position: list[float] = field(
        default_factory=lambda: [-0.56, 0.0, 0.0],
        metadata={"help": "robot base in the policy frame (the spec's base_position)"},
    )
    home: list[float] = field(
        default_factory=lambda: [0.0, 0.19635, 0.0, -2.61799, 0.0, 2.94159, 0.785398],
        metadata={"help": "joint home of each episode (the spec's home)"},
    )
    home_noise: float = field(
        default=0.02, metadata={"help": "rad, per joint, like the simulator's reset noise"}
    )
    warmup_s: float = field(
        default=3.0,
        metadata={
            "help": "s after start before the first episode (DDS discovery of the graph's other "
            "nodes)"
        },
    )
    reset: str = field(
        default="teleport",
        metadata={
            "help": "teleport (a simulated twin: the robot node puts the arm home, as the "
            "simulator resets) | trajectory (drive home through the safety layer, for a "
            "real arm)"
        },
    )
    home_tolerance: float = field(
        default=0.03, metadata={"help": "rad, max joint error to call the arm homed"}
    )
    home_timeout_s: float = 10.0
    joint_prefix: str = "panda_"
    seed: int = 0
    joint_states_topic: str = "joint_states"
    ee_pose_topic: str = "franka_robot_state_broadcaster/current_pose"
    goal_topic: str = "task/goal"
    instructions: list[str] = field(
        default_factory=list,
        metadata={
            "help": "task instructions; one drawn per episode and published on instruction_topic "
            "with the goal ([] = none)"
        },
    )
    instruction_topic: str = field(
        default="task/instruction",
        metadata={
            "help": "std_msgs/String the policy client sends as the observation's 'instruction'"
        },
    )
    scene_topic: str = field(
        default="sim/scene", metadata={"help": "task: language: the scene twin's report (JSON)"}
    )
    new_episode_topic: str = field(
        default="sim/new_episode", metadata={"help": "task: language: reset the scene"}
    )
    command_topic: str = "joint_trajectory_controller/joint_trajectory"
    enable_service: str = "policy_client/enable"
    status_topic: str = "task/status"
    event_topic: str = field(
        default="episode/event", metadata={"help": "EpisodeEvent JSON: each episode's end"}
    )
    results_path: str = field(
        default="", metadata={"help": "write the final episode results here (JSON)"}
    )
    reward_topic: str = field(
        default="task/reward",
        metadata={
            "help": "std_msgs/Float64 per step while running: the twin's success flag as reward "
            "(1 at the goal); '' = none"
        },
    )
    judge_ends_episodes: bool = field(
        default=True,
        metadata={
            "help": "true: the twin's success ends the episode (its flag is the reward); false: "
            "the flag is only reported (reward_topic: the judge a learned reward is compared "
            "with), episodes end at max_steps or on another's end on event_topic (the reward "
            "classifier, a human key), which the task node follows with the next reset. Either "
            "way a re-record (an aborted end on event_topic) discards the running episode and "
            "redoes it"
        },
    )

    def validate(self) -> None:
        if self.reset not in ("teleport", "trajectory"):
            raise ConfigError(
                f"key 'task.reset' is {self.reset!r}; use teleport (simulated twin) or trajectory"
            )


@dataclass
class RosEnvConfig:
    """RosRobotEnv: the robot over ROS as a vector env (reward from a registered source)."""

    reward: str = field(default="none", metadata={"help": "none | ee_distance | topic"})
    reward_topic: str = "reward"
    goal_position: tuple[float, float, float] = (0.5, 0.0, 0.4)
    success_radius: float = 0.03
    max_episode_steps: int = 100
    home_timeout_s: float = 10.0
    step_timeout_s: float = 1.0


@dataclass
class RosGraphConfig:
    """The whole graph. ``enabled: false`` (or, for the policy client, no section) starts no such
    node.

    Sections are not ``X | None``: a typo inside a section then gets an error naming the key.
    """

    domain_id: int | None = field(default=None, metadata={"help": "ROS_DOMAIN_ID (null: inherit)"})
    rmw: str = "rmw_fastrtps_cpp"
    log_level: str = "info"
    use_sim_time: bool = field(
        default=False,
        metadata={
            "help": "every node runs on /clock (ROS parameter use_sim_time, passed to each "
            "node); the simulated robot node publishes it with robot.sim_clock: true"
        },
    )
    shutdown_grace_s: float = field(
        default=10.0,
        metadata={
            "help": "s a node may take to stop after SIGINT / SIGTERM before it dumps its "
            "threads and exits 1"
        },
    )
    robot: RobotNodeConfig = field(default_factory=RobotNodeConfig)
    cameras: list[CameraNodeConfig] = field(default_factory=list)
    policy_client: PolicyClientConfig = field(
        default_factory=lambda: PolicyClientConfig(enabled=False)
    )
    task: TaskNodeConfig = field(default_factory=TaskNodeConfig)
    env: RosEnvConfig = field(default_factory=RosEnvConfig)
    teleop: TeleopNodeConfig = field(default_factory=TeleopNodeConfig)
    recorder: RecorderNodeConfig = field(default_factory=RecorderNodeConfig)
    streamer: StreamerNodeConfig = field(default_factory=StreamerNodeConfig)
    reward: RewardNodeConfig = field(default_factory=RewardNodeConfig)

    def node_names(self) -> dict[str, str]:
        """node name -> kind (``robot`` | ``camera`` | ``policy_client`` | ``task``), in start
        order."""
        out: dict[str, str] = {}
        if self.robot.enabled:
            out[self.robot.name] = "robot"
        for cam in self.cameras:
            out[cam.name] = "camera"
        if self.policy_client.enabled:
            out[self.policy_client.name] = "policy_client"
        if self.task.enabled:
            out[self.task.name] = "task"
        for kind in ("teleop", "recorder", "streamer", "reward"):
            section = getattr(self, kind)
            if section.enabled:
                out[section.name] = kind
        return out

    def validate(self) -> None:
        if self.shutdown_grace_s <= 0:
            raise ConfigError(f"key 'shutdown_grace_s' must be > 0, got {self.shutdown_grace_s}")
        if self.use_sim_time and self.robot.enabled and self.robot.scene.lockstep:
            raise ConfigError(
                "keys 'use_sim_time' and 'robot.scene.lockstep' exclude each other: a "
                "lock-step twin publishes no /clock (its time advances per applied action); "
                "set use_sim_time: false"
            )
        if self.policy_client.enabled:
            spec = self.policy_client.spec()  # a malformed spec fails here, before any node starts
            if self.robot.enabled and any(a.backend == "bridge" for a in self.robot.arms):
                self.robot.bridge.check_spec(spec)
            elif self.robot.enabled and spec.action.control == "ee_impedance":
                _check_impedance_arms(self.robot.arms, spec)
        names = (
            [c.name for c in self.cameras]
            + ([self.robot.name] if self.robot.enabled else [])
            + [
                getattr(self, k).name
                for k in ("policy_client", "task", "teleop", "recorder", "streamer", "reward")
                if getattr(self, k).enabled
            ]
        )
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(
                f"node names must be unique, {dup} repeats; set robot.name / cameras[*].name"
            )


def _check_impedance_arms(arms: list[ArmConfig], spec: RobotSpec) -> None:
    """An ``ee_impedance`` policy needs arms whose torque loop runs the spec's gains."""
    for arm in arms:
        gains = arm.gains()
        if gains is None:
            raise ConfigError(
                f"key 'robot.arms[{arm.name}].control' is {arm.control!r} but the policy "
                "client's robot spec uses ee_impedance; set control: ee_impedance (and "
                "impedance: the spec's action.impedance)"
            )
        if gains != spec.action.impedance:
            want = (spec.action.impedance or ImpedanceGains()).to_dict()
            got = gains.to_dict()
            diff = {k: (want[k], got[k]) for k in want if want[k] != got[k]}
            raise ConfigError(
                f"keys 'policy_client.robot_spec.action.impedance' and "
                f"'robot.arms[{arm.name}].impedance' differ (spec, arm): {diff}"
            )


def load_graph_config(
    path: str | Path | None, overrides: list[str] | None = None
) -> RosGraphConfig:
    """YAML (+ ``key=value`` overrides) -> :class:`RosGraphConfig`; errors name the key. An
    override may not carry a secret: ``rlinf ros up`` passes overrides to every node's argv."""
    reject_secret_overrides(overrides)
    data: dict[str, Any] = load_config(path, overrides)
    return from_dict(RosGraphConfig, data)
