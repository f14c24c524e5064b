"""The push twin shows the policy what the simulator showed it (no ROS processes here).

The robot node's arm adopts a ``mujoco_franka/push`` env (``arms[*].scene: mujoco_franka/push``,
``TaskSceneTwin``). The policy client builds the state from what the graph publishes: joint
states and the end-effector pose (robot node), the cube (``sim/objects``, base frame, relayed by
the task node as the object pose) and the goal (the scene report's target minus the spec's base
position, as the task node publishes it). On the same MuJoCo state that vector must equal the
simulator's own observation; and the scripted pusher the demos come from must solve push.
"""

from __future__ import annotations

import numpy as np
import pytest
from twin_reading import arm_reading

pytest.importorskip("mujoco", reason="needs the sim extra")

from rlinf_contracts.features import build_state, needs
from rlinf_ros.nodes.scene_twin import world_to_base
from robot_drivers.factory import ArmConfig, make_arm

pytestmark = [pytest.mark.sim]


def test_topic_state_equals_the_simulators_push_observation():
    arm = make_arm(ArmConfig(name="panda", scene="mujoco_franka/push"))
    arm.connect()
    backend, twin = arm.backend, arm.backend.scene
    spec = twin.env.spec.robot
    assert needs(spec, "object_pos") and needs(spec, "goal_pos") and needs(spec, "ee_pose")
    base = np.asarray(spec.base_position)
    for episode in range(3):
        backend.new_episode()
        backend.step(20)  # the arm settles a little: joint velocities are not zero
        reading = arm_reading(
            arm,
            object_pos=world_to_base(backend, twin.object_positions())[0],
            goal_pos=twin.target_position() - base,
        )
        np.testing.assert_allclose(
            build_state(spec, reading), twin.state(), atol=2e-5, err_msg=f"episode {episode}"
        )
        assert not twin.success()  # the goal is sampled >= 10 cm from the cube
    assert twin.episodes == 3


def test_twin_episodes_replay_the_sim_evals_seeds():
    from rlinf_contracts.env_registry import make_env

    arm = make_arm(ArmConfig(name="panda", scene="mujoco_franka/push", scene_seed=700))
    arm.connect()
    twin = arm.backend.scene
    for k in (1, 3):
        arm.backend.new_episode(k)
        env = make_env("mujoco_franka/push", num_envs=1, obs_mode="state", control="ee_delta_pos")
        obs = env.reset(seed=700 + k - 1)
        np.testing.assert_allclose(
            twin.state()[24:], obs["state"][0][24:], atol=1e-6
        )  # cube + goal
        env.close()


def test_scripted_pusher_is_the_push_oracle_and_solves_push():
    """The scripted teleop device (base-frame poses, as the teleop node hears them) commands the
    simulator's push oracle, and driving the simulator with it succeeds."""
    from rlinf_contracts.env_registry import make_env
    from rlinf_ros.teleop import to_action
    from rlinf_ros.teleop.scripted import ScriptedPush
    from sim_bridges.mujoco_franka.tasks.base import body_pos

    env = make_env("mujoco_franka/push", num_envs=1, obs_mode="state", control="ee_delta_pos")
    spec = env.spec.robot
    base = np.asarray(spec.base_position)
    dev = ScriptedPush(pos_scale=spec.action.pos_scale, always=True)
    fm, d, task = env.fms[0], env.datas[0], env.task
    successes = 0
    for seed in range(4):
        env.reset(seed=seed)
        for _ in range(task.default_max_steps):
            ee = d.site_xpos[fm.ee_site].copy()
            dev.on_pose(ee - base)
            dev.on_object(body_pos(fm, d, "object") - base)
            dev.on_goal(d.mocap_pos[fm.marker_mocap["goal"]] - base)
            inp = dev.read()
            oracle = task.oracle(fm, d, ee)
            np.testing.assert_allclose(
                inp.twist[:3], np.clip(oracle[:3] / spec.action.pos_scale, -1, 1), atol=1e-9
            )
            assert inp.gripper == oracle[3] and inp.intervention
            _, _, terminated, _, info = env.step(
                to_action(inp, spec, None, -1.0)[None].astype(np.float32)
            )
            if info["success"][0]:
                successes += 1
                break
    assert successes >= 3, successes


def test_an_unknown_task_scene_is_refused_naming_it():
    from robot_drivers.arm import DriverError

    with pytest.raises(DriverError, match="scene 'mujoco_franka/' unknown"):
        make_arm(ArmConfig(name="panda", scene="mujoco_franka/"))
    with pytest.raises(DriverError, match="scene 'isaac/push' unknown"):
        make_arm(ArmConfig(name="panda", scene="isaac/push"))


def test_scripted_device_picks_the_pusher_by_script_task():
    from types import SimpleNamespace

    from rlinf_ros.teleop import make_device
    from rlinf_ros.teleop.scripted import ScriptedPush, ScriptedReach

    cfg = SimpleNamespace(script={"task": "push"}, always_intervene=True)
    assert isinstance(make_device("scripted", cfg), ScriptedPush)
    assert (
        type(make_device("scripted", SimpleNamespace(script={}, always_intervene=True)))
        is ScriptedReach
    )
    with pytest.raises(ValueError, match="teleop.script.task"):
        make_device("scripted", SimpleNamespace(script={"task": "stack"}, always_intervene=True))


@pytest.mark.parametrize(
    "graph", ["configs/ros_sim_franka_push.yaml", "configs/ros_sim_franka_push_pixels.yaml"]
)
def test_push_twins_let_the_hand_as_low_as_the_simulator_does(graph):
    """The simulator the held-out episodes run in has no workspace box, and a pushing policy
    commands the hand below the safety default's 2 cm floor: the push twins' box must pass a
    target just above the table top unchanged (the default slides it along its floor)."""
    from pathlib import Path

    from rlinf_ros.config import load_graph_config
    from robot_drivers.safety import SafetyConfig, SafetyLayer
    from sim_bridges.mujoco_franka.model import HOME_QPOS, TABLE_HEIGHT

    cfg = load_graph_config(Path(__file__).resolve().parents[2] / graph)
    base_z = float(cfg.policy_client.robot_spec["base_position"][2])
    target = np.eye(4)
    target[:3, 3] = (0.45, 0.05, TABLE_HEIGHT - base_z + 0.008)  # 8 mm over the table, base frame
    q_home = np.asarray(HOME_QPOS, dtype=np.float64)
    twin = SafetyLayer(cfg.robot.arms[0].safety).filter_pose_target(target, q_home)
    assert twin.events == () and np.array_equal(twin.target, target)
    default = SafetyLayer(SafetyConfig()).filter_pose_target(target, q_home)
    assert default.events == ("workspace",) and default.target[2, 3] == pytest.approx(0.02)
