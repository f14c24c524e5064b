"""Bridge targets: the controllers people already run, with their topic and parameter names as data.

Why a table and not code per controller: what differs between franka_ros2's trajectory or
Cartesian impedance controllers and CRISP's Cartesian controller is only *names* -- the topic a
target goes to, the node whose parameters hold the gains, and which parameter takes which gain.
One :class:`BridgeController` row per controller keeps those names in one place, checked
against the upstream sources (``docs/bridge_controllers.md`` says where each comes from), and
lets ``robot.bridge.target`` pick one by name. No ROS here: ``rlinf_ros/bridge_io.py`` resolves
the names and ``rlinf_ros/bridge_gains.py`` sets the gains.

Names are namespace-agnostic. A topic is written as ROS resolves it from the controller's node:
``~/x`` is private to the controller (``/<namespace>/<controller>/x``), ``x`` is relative to
the namespace (``/<namespace>/x``), ``/x`` is absolute; the namespace and the controller's node
name are configuration (``robot.bridge.namespace``, ``robot.bridge.controller``).

>>> crisp = bridge_controller("crisp_cartesian_impedance")
>>> crisp.command_topic("fr3", crisp.default_controller), crisp.parameter_node("fr3", "cic")
('/fr3/target_pose', '/fr3/cic')
>>> values = crisp.gain_values(ImpedanceGains(stiffness_pos=600.0, stiffness_rot=30.0))
>>> values["task.k_pos_x"], values["task.d_pos_x"], values["nullspace.stiffness"]
(600.0, 48.98979485566356, 10.0)
>>> bridge_controller("franka_joint_trajectory").command_topic("", "fr3_arm_controller")
'/fr3_arm_controller/joint_trajectory'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlinf_contracts.config import ConfigError
from rlinf_contracts.impedance import ImpedanceGains
from rlinf_contracts.registry import Registry, UnknownNameError

COMMANDS = ("joint_trajectory", "pose")  # what the bridge publishes: JointTrajectory | PoseStamped


@dataclass(frozen=True)
class GainParameter:
    """One parameter of the controller node and the :class:`ImpedanceGains` field it takes."""

    name: str
    gain: str


@dataclass(frozen=True)
class BridgeController:
    """A controller someone already runs, as names.

    ``command_topic_name`` empty means the controller has no fixed target topic and the
    configuration names it (``robot.bridge.target_pose``). ``critical_damping`` lists the
    ``(damping, stiffness)`` gain pairs the controller does not take but derives as
    ``2 sqrt(k)``: a spec asking for another damping would meet another compliance, so it is
    refused rather than silently changed.
    """

    name: str
    command: str
    command_topic_name: str
    default_controller: str
    parameters: tuple[GainParameter, ...] = ()
    critical_damping: tuple[tuple[str, str], ...] = ()
    origin: str = ""

    @property
    def takes_gains(self) -> bool:
        return bool(self.parameters)

    def command_topic(self, namespace: str, controller: str, configured: str = "") -> str:
        """The absolute topic a target goes to."""
        name = self.command_topic_name or configured
        if not name:
            raise ConfigError(
                f"key 'robot.bridge.target_pose': bridge target {self.name!r} has no fixed target "
                "topic; name the controller's PoseStamped topic"
            )
        return resolve(name, namespace, controller)

    def parameter_node(self, namespace: str, controller: str) -> str:
        """The fully qualified node whose ``set_parameters`` service holds the gains."""
        return resolve("~", namespace, controller)

    def gain_values(self, gains: ImpedanceGains, key: str = "robot.bridge.impedance") -> dict:
        """``{parameter name: value}`` for ``gains``; :class:`ConfigError` naming ``key`` when the
        controller cannot realise them."""
        for damping, stiffness in self.critical_damping:
            want = 2.0 * math.sqrt(getattr(gains, stiffness))
            got = getattr(gains, damping)
            if got is None or not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9):
                raise ConfigError(
                    f"key '{key}.{damping}'={got!r}: controller {self.name!r} derives its damping "
                    f"as 2 sqrt({stiffness}) = {want:g} and has no parameter for it; leave "
                    f"{damping} unset (critical) or pick a target whose damping is a parameter"
                )
        return {p.name: float(getattr(gains, p.gain)) for p in self.parameters}


def resolve(name: str, namespace: str, node: str) -> str:
    """ROS name resolution of ``name`` seen from node ``node`` in ``namespace``."""
    ns = "/" + namespace.strip("/") if namespace.strip("/") else ""
    node = node.strip("/")
    if name.startswith("/"):
        return name
    if name == "~" or name.startswith("~/"):
        return f"{ns}/{node}{name[1:]}"
    return f"{ns}/{name}"


BRIDGE_CONTROLLERS: Registry[BridgeController] = Registry("bridge target")


def _add(c: BridgeController) -> None:
    if c.command not in COMMANDS:
        raise ValueError(f"bridge target {c.name!r}: command {c.command!r} not in {COMMANDS}")
    BRIDGE_CONTROLLERS.add(c.name, c)


def _axes(prefix: str, gain: str) -> tuple[GainParameter, ...]:
    return tuple(GainParameter(f"{prefix}_{axis}", gain) for axis in ("x", "y", "z"))


# ros2_control's JointTrajectoryController as franka_ros2 runs it (fr3_arm_controller)
_add(
    BridgeController(
        name="franka_joint_trajectory",
        command="joint_trajectory",
        command_topic_name="~/joint_trajectory",
        default_controller="joint_trajectory_controller",
        origin="ros2_controllers joint_trajectory_controller (trajectory_msgs/JointTrajectory)",
    )
)
# franka_ros2's cartesian_pose_example_controller commands a fixed demo motion and subscribes to
# nothing: a pose controller built on it names its target topic in the configuration
_add(
    BridgeController(
        name="franka_cartesian_pose",
        command="pose",
        command_topic_name="",
        default_controller="cartesian_pose_example_controller",
        origin="franka_example_controllers CartesianPoseExampleController (no target topic)",
    )
)
# franka_ros2 (frankarobotics, fr3/) cartesian_impedance_example_controller: a private
# equilibrium pose topic, stiffness parameters, damping derived critical (2 sqrt(k))
_add(
    BridgeController(
        name="franka_cartesian_impedance",
        command="pose",
        command_topic_name="~/equilibrium_pose",
        default_controller="cartesian_impedance_example_controller",
        parameters=(
            GainParameter("translational_stiffness", "stiffness_pos"),
            GainParameter("rotational_stiffness", "stiffness_rot"),
            GainParameter("nullspace_stiffness", "nullspace_stiffness"),
        ),
        critical_damping=(
            ("damping_pos", "stiffness_pos"),
            ("damping_rot", "stiffness_rot"),
            ("nullspace_damping", "nullspace_stiffness"),
        ),
        origin="franka_example_controllers fr3/CartesianImpedanceExampleController",
    )
)
# CRISP (utiasDSL/crisp_controllers) CartesianController: target_pose relative to the namespace,
# per-axis stiffness / damping parameters under task.*, null space under nullspace.*; its
# pose_broadcaster publishes current_pose in the same namespace
_add(
    BridgeController(
        name="crisp_cartesian_impedance",
        command="pose",
        command_topic_name="target_pose",
        default_controller="cartesian_impedance_controller",
        parameters=(
            *_axes("task.k_pos", "stiffness_pos"),
            *_axes("task.k_rot", "stiffness_rot"),
            *_axes("task.d_pos", "damping_pos"),
            *_axes("task.d_rot", "damping_rot"),
            GainParameter("nullspace.stiffness", "nullspace_stiffness"),
            GainParameter("nullspace.damping", "nullspace_damping"),
        ),
        origin="crisp_controllers CartesianController + PoseBroadcaster",
    )
)

# robot.bridge.command, the older spelling of a target
LEGACY_COMMANDS = {
    "joint_trajectory": "franka_joint_trajectory",
    "cartesian_pose": "franka_cartesian_pose",
}


def bridge_controller(name: str, key: str = "robot.bridge.target") -> BridgeController:
    """The registered target ``name``; :class:`ConfigError` naming ``key`` and the known ones."""
    try:
        return BRIDGE_CONTROLLERS.get(name)
    except UnknownNameError as e:
        raise ConfigError(f"key '{key}': {e}") from None
