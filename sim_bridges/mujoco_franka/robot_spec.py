"""The robot/task spec of a MuJoCo Franka env: what its state vector and actions mean.

Why its own module: this is the data a checkpoint carries to the ROS 2 graph (the simulated
twin or a real Panda). The robot part of the state (``ee_pos ee_rot6d joint_pos joint_vel
gripper_width``, 24 floats) is what franka_ros2 topics carry; the task part (reach:
``goal_pos goal_minus_ee``) comes from the task's ``state_fields``; Cartesian features are in
the simulator's world frame, where the robot base sits at ``ROBOT_BASE`` — so a robot that
reports poses in its base frame adds that offset and sees what the policy saw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlinf_contracts.spec import CameraSpec, RobotSpec, StateField
from sim_bridges.mujoco_franka.control import ControlConfig
from sim_bridges.mujoco_franka.model import HOME_QPOS, ROBOT_BASE

if TYPE_CHECKING:
    from sim_bridges.mujoco_franka.config import FrankaEnvConfig
    from sim_bridges.mujoco_franka.tasks import FrankaTask

ROBOT_FIELDS = (
    StateField("ee_pos", 3),
    StateField("ee_rot6d", 6),
    StateField("joint_pos", 7),
    StateField("joint_vel", 7),
    StateField("gripper_width", 1),
)


def franka_robot_spec(cfg: FrankaEnvConfig, task: FrankaTask, control: ControlConfig) -> RobotSpec:
    """The spec of ``mujoco_franka/<task>`` with these options (image-only envs zero the task
    part)."""
    task_fields = tuple(
        StateField(f.name, f.size, zeroed=not cfg.uses_state) for f in task.state_fields
    )
    if sum(f.size for f in task_fields) != task.feature_dim:
        raise ValueError(
            f"task '{task.name}' declares state_fields of {sum(f.size for f in task_fields)} "
            f"floats but feature_dim={task.feature_dim}"
        )
    h, w = cfg.image_hw
    return RobotSpec(
        state=ROBOT_FIELDS + task_fields,
        action=control.action_space,
        cameras=tuple(CameraSpec(c, h, w) for c in cfg.cameras) if cfg.uses_images else (),
        control_hz=cfg.control_hz,
        robot="panda",
        task=f"mujoco_franka/{task.name}",
        instruction=task.instruction,
        base_position=(float(ROBOT_BASE[0]), float(ROBOT_BASE[1]), float(ROBOT_BASE[2])),
        home=tuple(float(x) for x in HOME_QPOS),
    )
