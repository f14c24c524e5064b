"""Pure controller math: rotations (as the controller uses them), DLS step, gripper mapping."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from rlinf_contracts.rotations import matrix_to_rotvec, orientation_error, rotvec_to_matrix
from sim_bridges.mujoco_franka.control import ControlConfig, dls_step, gripper_ctrl


def test_rotvec_matrix_roundtrip_matches_mujoco() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(20, 3))
    vecs *= (rng.uniform(0.0, 3.0, size=20) / np.linalg.norm(vecs, axis=1))[:, None]
    vecs[0] = 0.0
    mats = rotvec_to_matrix(vecs)
    for v, m in zip(vecs, mats):
        quat, ref = np.empty(4), np.empty(9)
        angle = np.linalg.norm(v)
        mujoco.mju_axisAngle2Quat(quat, v / angle if angle > 0 else np.array([1.0, 0, 0]), angle)
        mujoco.mju_quat2Mat(ref, quat)
        np.testing.assert_allclose(m, ref.reshape(3, 3), atol=1e-9)
    np.testing.assert_allclose(matrix_to_rotvec(mats), vecs, atol=1e-7)


def test_orientation_error_is_world_frame_delta() -> None:
    cur = rotvec_to_matrix(np.array([[0.3, -0.2, 0.5]]))
    delta = np.array([[0.0, 0.0, 0.4]])
    tgt = rotvec_to_matrix(delta) @ cur
    np.testing.assert_allclose(orientation_error(tgt, cur), delta, atol=1e-9)


def test_dls_step_solves_a_well_conditioned_system() -> None:
    rng = np.random.default_rng(1)
    jac = rng.normal(size=(2, 3, 7))
    err = rng.normal(size=(2, 3)) * 0.01
    dq = dls_step(jac, err, np.zeros((2, 7)), damping=1e-4, nullspace_gain=0.0)
    np.testing.assert_allclose((jac @ dq[..., None])[..., 0], err, atol=1e-6)


def test_gripper_mapping_and_bad_mode() -> None:
    np.testing.assert_allclose(
        gripper_ctrl(np.array([-1.0, 0.0, 1.0])), [[0, 0], [0.02, -0.02], [0.04, -0.04]]
    )
    with pytest.raises(ValueError, match="control='ee_vel'"):
        ControlConfig(mode="ee_vel")
