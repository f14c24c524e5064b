"""The language twin shows the policy what the simulator showed it (no ROS processes here).

The robot node's arm adopts a ``franka_language`` env's scene (``arms[*].scene``); the policy
client builds the state from what the robot node publishes (joint states, the end-effector pose
in the base frame, the object slots as a PoseArray in the base frame). On the same physical
state that vector, and the front-camera frame, must equal the simulator's own observation.
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


def test_topic_state_and_camera_equal_the_simulators_observation():
    arm = make_arm(ArmConfig(name="panda", scene="franka_language/mix"))
    arm.connect()
    backend = arm.backend
    twin = backend.scene
    env = twin.env
    spec = env.spec.robot
    assert needs(spec, "objects") and needs(spec, "ee_pose")
    for episode in range(3):
        backend.new_episode()
        backend.step(20)  # the arm settles a little: joint velocities are not zero
        env._refresh(np.arange(1))
        obs = env._observe()  # the simulator's observation of this physical state
        reading = arm_reading(
            arm,
            objects=world_to_base(backend, twin.object_positions()),
        )
        state = build_state(spec, reading)
        np.testing.assert_allclose(state, obs["state"][0], atol=2e-5, err_msg=f"episode {episode}")
        frame = backend.render("front", 0, 0)
        np.testing.assert_array_equal(frame, obs["images"]["front"][0])
        assert obs["instruction"][0] == twin.instruction and twin.instruction
    assert twin.episodes == 3


def test_twin_episodes_replay_the_sim_evals_held_out_seeds():
    """Episode k of a twin with scene_seed S is what ``rlinf eval`` draws for seed S + k - 1."""
    from rlinf_contracts.env_registry import make_env

    arm = make_arm(ArmConfig(name="panda", scene="franka_language/mix", scene_seed=500))
    arm.connect()
    twin = arm.backend.scene
    for k in (1, 2, 5):
        arm.backend.new_episode(k)
        env = make_env(
            "franka_language/mix",
            num_envs=1,
            obs_mode="state+rgb",
            cameras=["front"],
            image_size=64,
        )
        obs = env.reset(seed=500 + k - 1)
        assert twin.instruction == obs["instruction"][0]
        np.testing.assert_allclose(
            twin.object_positions(),
            np.stack(
                [
                    env.datas[0].qpos[env.fms[0].object_qpos[n] : env.fms[0].object_qpos[n] + 3]
                    for n in ("obj0", "obj1", "obj2")
                ]
            ),
        )
        np.testing.assert_allclose(arm.state().q, env.datas[0].qpos[env.fms[0].arm_qpos])
        # colours too (frames are compared in the test above: two GL renderers in one process
        # disagree)
        assert twin.env.task.episode(twin.data).colours == env.task.episode(env.datas[0]).colours
        env.close()


def test_an_unknown_scene_is_refused_naming_it():
    from robot_drivers.arm import DriverError

    with pytest.raises(DriverError, match="scene 'franka_language' unknown"):
        make_arm(ArmConfig(name="panda", scene="franka_language"))
