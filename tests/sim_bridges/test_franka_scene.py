"""FrankaScene: the single-robot API the simulated driver uses."""

from __future__ import annotations

import numpy as np
import pytest

from sim_bridges.mujoco_franka.model import HOME_QPOS
from sim_bridges.mujoco_franka.scene import FrankaScene

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def scene() -> FrankaScene:
    s = FrankaScene()
    yield s
    s.close()


def test_holds_home_pose_under_gravity(scene: FrankaScene) -> None:
    scene.reset()
    scene.set_joint_targets(HOME_QPOS)
    scene.step(200)
    np.testing.assert_allclose(scene.q, HOME_QPOS, atol=0.01)
    assert np.abs(scene.dq).max() < 0.01


def test_tracks_joint_targets_and_reports_torque(scene: FrankaScene) -> None:
    scene.reset()
    target = HOME_QPOS + np.array([0.3, -0.2, 0.2, 0.3, -0.3, 0.2, 0.4])
    scene.set_joint_targets(target)
    scene.step(400)
    np.testing.assert_allclose(scene.q, target, atol=0.02)
    assert np.abs(scene.tau[:4]).max() > 1.0  # holding the arm against gravity costs torque


def test_velocity_command_integrates(scene: FrankaScene) -> None:
    scene.reset()
    q0 = scene.q
    scene.set_joint_velocities(np.array([0.5, 0, 0, 0, 0, 0, 0]))
    scene.step(200)  # 1 s
    assert scene.q[0] - q0[0] == pytest.approx(0.5, abs=0.05)
    assert scene.time == pytest.approx(1.0)


def test_ee_pose_and_gripper(scene: FrankaScene) -> None:
    scene.reset()
    pos, quat = scene.ee_pose()
    assert np.linalg.norm(quat) == pytest.approx(1.0)
    np.testing.assert_allclose(scene.ee_matrix()[:3, 3], pos)
    assert scene.gripper_width == pytest.approx(0.08, abs=1e-3)
    scene.set_gripper(0.02)
    scene.step(200)
    assert scene.gripper_width == pytest.approx(0.02, abs=0.003)
    with pytest.raises(ValueError, match="7 joint positions"):
        scene.set_joint_targets(np.zeros(6))


def test_render_cameras(scene: FrankaScene) -> None:
    for cam in ("third", "wrist"):
        img = scene.render(cam, 48, 64)
        assert img.shape == (48, 64, 3) and img.dtype == np.uint8 and img.std() > 5
    with pytest.raises(ValueError, match="unknown camera"):
        scene.render("nope")
