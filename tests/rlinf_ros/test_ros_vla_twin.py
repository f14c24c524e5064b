"""The language twin shows the policy what the simulator showed it (no ROS processes here).

The robot node's arm adopts a ``franka_language`` env's scene (``arms[*].scene``); the policy
client builds the state from what the robot node publishes (joint states, the end-effector pose
in the base frame, the object slots as a PoseArray in the base frame). On the same physical
state that vector, and the front-camera frame, must equal the simulator's own observation.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="needs the sim extra")

from rlinf_contracts.features import RobotReading, build_state, needs  # noqa: E402
from rlinf_contracts.rotations import quat_xyzw_to_matrix  # noqa: E402
from robot_drivers.factory import ArmConfig, make_arm  # noqa: E402

pytestmark = [pytest.mark.sim]


def _base_frame(backend, points: np.ndarray) -> np.ndarray:
    d = backend.data
    return (np.asarray(points) - d.xpos[backend._base]) @ d.xmat[backend._base].reshape(3, 3)


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
        s = arm.state()
        reading = RobotReading(q=s.q, dq=s.dq, ee_pos=s.ee_pose.position, ee_rot=quat_xyzw_to_matrix(s.ee_pose.quat_xyzw),
                               gripper_width=s.gripper.width, objects=_base_frame(backend, twin.object_positions()))
        state = build_state(spec, reading)
        np.testing.assert_allclose(state, obs["state"][0], atol=2e-5, err_msg=f"episode {episode}")
        frame = backend.render("front", 0, 0)
        np.testing.assert_array_equal(frame, obs["images"]["front"][0])
        assert obs["instruction"][0] == twin.instruction and twin.instruction
    assert twin.episodes == 3


def test_an_unknown_scene_is_refused_naming_it():
    from robot_drivers.arm import DriverError

    with pytest.raises(DriverError, match="scene 'franka_language' unknown"):
        make_arm(ArmConfig(name="panda", scene="franka_language"))
