"""The robot spec is one contract: the simulator's state equals what the robot side builds from a
reading of the same physical state, and an action means the same joint target on both sides."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts.features import MissingInput, RobotReading, build_state
from rlinf_contracts.spec import (
    ActionSpace,
    CameraSpec,
    RobotSpec,
    SpecError,
    StateField,
    check_compatible,
)

mujoco = pytest.importorskip("mujoco", reason="needs the sim extra")

from rlinf_contracts.env_registry import make_env  # noqa: E402
from sim_bridges.mujoco_franka.model import ROBOT_BASE  # noqa: E402


def _reading(env, i: int) -> RobotReading:
    """What a robot on ROS reports for sub-env i: base-frame poses, joints, gripper, task inputs."""
    fm, d = env.fms[i], env.datas[i]
    base = np.asarray(ROBOT_BASE)
    task = {}
    if "target" in fm.marker_mocap:
        task["goal_pos"] = d.mocap_pos[fm.marker_mocap["target"]] - base
    if "goal" in fm.marker_mocap:
        task["goal_pos"] = d.mocap_pos[fm.marker_mocap["goal"]] - base
    if "object" in fm.object_qpos:
        adr = fm.object_qpos["object"]
        task["object_pos"] = d.qpos[adr : adr + 3] - base
        task["object_height"] = float(d.qpos[adr + 2] - env._raw_const[i])
    return RobotReading(
        q=d.qpos[fm.arm_qpos].copy(),
        dq=d.qvel[fm.arm_dof].copy(),
        ee_pos=d.site_xpos[fm.ee_site] - base,
        ee_rot=d.site_xmat[fm.ee_site].reshape(3, 3).copy(),
        gripper_width=float(d.qpos[fm.grip_qpos[0]] - d.qpos[fm.grip_qpos[1]]),
        **task,
    )


@pytest.mark.parametrize("task", ["reach", "push", "lift"])
def test_robot_side_state_equals_the_simulators(task: str) -> None:
    env = make_env(f"mujoco_franka/{task}", num_envs=3, seed=1)
    obs = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(6):
        for i in range(env.num_envs):
            np.testing.assert_allclose(
                build_state(env.spec.robot, _reading(env, i)), obs["state"][i], atol=2e-5
            )
        obs, *_ = env.step(rng.uniform(-1, 1, (3, env.spec.action_dim)).astype(np.float32))
    env.close()


def test_robot_side_decoder_matches_the_simulators_control_law() -> None:
    """The ROS side decodes ee_delta with the numpy Franka kinematics at the reported point; the
    simulator with MuJoCo's Jacobian. Same action, (nearly) the same joint target."""
    from rlinf_ros.robot_io import SpecIO
    from sim_bridges.mujoco_franka.control import arm_targets

    env = make_env("mujoco_franka/reach", num_envs=1, seed=0)
    env.reset(seed=5)
    io = SpecIO(env.spec.robot)
    fm, d = env.fms[0], env.datas[0]
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(10):
        a = rng.uniform(-1, 1, 7)
        reading = _reading(env, 0)
        io.begin_episode([reading])
        ros = io.decode(a[None], [reading])[0].joints[0]
        target_rot = env._target_rot[:1].copy()
        target_rot[:] = (
            reading.ee_rot
        )  # the ROS side holds the orientation measured at episode start
        sim = arm_targets(env.control, fm, [d], a[None, :-1], target_rot)[0]
        worst = max(worst, float(np.abs(ros - sim).max()))
        env.step(a[None].astype(np.float32))
    assert worst < 2e-3, f"ROS-side and simulator joint targets differ by {worst:.4f} rad"


def test_mismatch_names_both_layouts() -> None:
    reach = make_env("mujoco_franka/reach", 1).spec.robot
    joints = RobotSpec(
        state=(StateField("joint_pos", 7), StateField("gripper_width", 1)),
        action=ActionSpace("joint_delta", 8),
        cameras=(CameraSpec("camera", 224, 224),),
    )
    with pytest.raises(SpecError) as err:
        check_compatible(reach, joints)
    msg = str(err.value)
    assert (
        "state layout differs: ee_pos(3) ee_rot6d(6) joint_pos(7) joint_vel(7) "
        "gripper_width(1) goal_pos(3) goal_minus_ee(3) vs joint_pos(7) gripper_width(1)" in msg
    )
    assert "action differs: ee_delta[7]" in msg and "vs joint_delta[8]" in msg
    assert "cameras differ: none vs camera(224x224)" in msg
    check_compatible(
        reach, RobotSpec.from_dict(reach.to_dict())
    )  # a spec fits itself after a round trip


def test_spec_errors_name_the_field() -> None:
    with pytest.raises(SpecError, match="action.control='ee_velocity'"):
        ActionSpace("ee_velocity", 7).validate()
    with pytest.raises(SpecError, match=r"unknown robot spec field\(s\) \['stat'\]"):
        RobotSpec.from_dict({"stat": []})
    with pytest.raises(MissingInput, match="goal position"):
        build_state(
            make_env("mujoco_franka/reach", 1).spec.robot,
            RobotReading(q=np.zeros(7), ee_pos=np.zeros(3), ee_rot=np.eye(3)),
        )


def test_the_shipped_ros_twin_config_declares_the_simulators_reach_spec() -> None:
    from pathlib import Path

    from rlinf_ros.config import load_graph_config

    root = Path(__file__).resolve().parents[2]
    cfg = load_graph_config(root / "configs/ros_sim_franka.yaml")
    assert cfg.policy_client.spec() == make_env("mujoco_franka/reach", 1).spec.robot
    task = cfg.task
    from sim_bridges.mujoco_franka.model import HOME_QPOS
    from sim_bridges.mujoco_franka.tasks.reach import TARGET_BOX, ReachTask

    np.testing.assert_allclose(task.goal_center, TARGET_BOX.center)
    np.testing.assert_allclose(task.goal_half, TARGET_BOX.half)
    np.testing.assert_allclose(task.base_position, ROBOT_BASE)
    np.testing.assert_allclose(task.home, HOME_QPOS, atol=1e-5)
    assert task.success_radius == ReachTask.success_radius
