"""rlinf_contracts.rotations: exact values, agreement with MuJoCo, and round-trip properties
(hypothesis) including angles within 1e-6 of pi and of 0, where copies of this maths used to
disagree."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts import rotations as rot

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

S = np.sqrt(0.5)


@pytest.mark.parametrize(
    "rotvec, matrix, quat",
    [
        ([0, 0, 0], np.eye(3), [0, 0, 0, 1]),
        ([0, 0, np.pi / 2], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], [0, 0, S, S]),
        ([np.pi / 2, 0, 0], [[1, 0, 0], [0, 0, -1], [0, 1, 0]], [S, 0, 0, S]),
        ([0, np.pi, 0], [[-1, 0, 0], [0, 1, 0], [0, 0, -1]], [0, 1, 0, 0]),
        ([np.pi * S, np.pi * S, 0], [[0, 1, 0], [1, 0, 0], [0, 0, -1]], [S, S, 0, 0]),
        ([np.pi * S, -np.pi * S, 0], [[0, -1, 0], [-1, 0, 0], [0, 0, -1]], [S, -S, 0, 0]),
    ],
)
def test_exact_values(rotvec, matrix, quat) -> None:
    rotvec, matrix, quat = (np.asarray(x, dtype=float) for x in (rotvec, matrix, quat))
    np.testing.assert_allclose(rot.rotvec_to_matrix(rotvec), matrix, atol=1e-15)
    np.testing.assert_allclose(rot.quat_xyzw_to_matrix(quat), matrix, atol=1e-15)
    np.testing.assert_allclose(rot.rotvec_to_quat_xyzw(rotvec), quat, atol=1e-15)
    back = rot.matrix_to_rotvec(matrix)
    q = rot.matrix_to_quat_xyzw(matrix)
    if np.isclose(np.linalg.norm(rotvec), np.pi):  # at pi, v and -v are the same rotation
        assert np.allclose(back, rotvec, atol=1e-12) or np.allclose(back, -rotvec, atol=1e-12)
        assert np.allclose(q, quat, atol=1e-15) or np.allclose(q, -quat, atol=1e-15)
    else:
        np.testing.assert_allclose(back, rotvec, atol=1e-15)
        np.testing.assert_allclose(q, quat, atol=1e-15)
    np.testing.assert_allclose(rot.quat_xyzw_to_rotvec(quat), back, atol=1e-15)


def test_quaternion_orders_and_rot6d_layout() -> None:
    np.testing.assert_array_equal(rot.quat_wxyz_to_xyzw(np.array([1.0, 2, 3, 4])), [2, 3, 4, 1])
    np.testing.assert_array_equal(rot.quat_xyzw_to_wxyz(np.array([[2.0, 3, 4, 1]])), [[1, 2, 3, 4]])
    m = np.arange(9.0).reshape(3, 3)  # rot6d is column 0 then column 1
    np.testing.assert_array_equal(rot.matrix_to_rot6d(m), [0, 3, 6, 1, 4, 7])
    # the MuJoCo Franka state takes the same entries from the row-major site_xmat
    from sim_bridges.mujoco_franka.vector_env import _STATE_COLS

    np.testing.assert_array_equal(
        np.r_[np.zeros(3), m.ravel()][_STATE_COLS[3:9]], [0, 3, 6, 1, 4, 7]
    )


def test_matches_mujoco_conversions() -> None:
    mujoco = pytest.importorskip("mujoco")
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(size=3)
        v *= rng.uniform(0.0, np.pi) / np.linalg.norm(v)
        q_wxyz, mat = np.empty(4), np.empty(9)
        mujoco.mju_axisAngle2Quat(q_wxyz, v / np.linalg.norm(v), np.linalg.norm(v))
        mujoco.mju_quat2Mat(mat, q_wxyz)
        np.testing.assert_allclose(rot.rotvec_to_matrix(v), mat.reshape(3, 3), atol=1e-12)
        np.testing.assert_allclose(
            rot.rotvec_to_quat_xyzw(v), rot.quat_wxyz_to_xyzw(q_wxyz), atol=1e-12
        )


def test_batched_shapes_and_errors() -> None:
    v = np.zeros((2, 5, 3))
    assert rot.rotvec_to_matrix(v).shape == (2, 5, 3, 3)
    assert rot.matrix_to_rotvec(rot.rotvec_to_matrix(v)).shape == (2, 5, 3)
    assert rot.matrix_to_quat_xyzw(np.eye(3)).shape == (4,)
    assert rot.rot6d_to_matrix(np.zeros((4, 6)) + [1, 0, 0, 0, 1, 0]).shape == (4, 3, 3)
    with pytest.raises(ValueError, match=r"shape \[\.\.\., 3\], got \(4,\)"):
        rot.rotvec_to_matrix(np.zeros(4))
    with pytest.raises(ValueError, match="zero norm"):
        rot.quat_xyzw_to_matrix(np.zeros(4))


def test_orientation_error_is_the_world_frame_delta() -> None:
    cur = rot.rotvec_to_matrix(np.array([0.3, -0.2, 0.5]))
    delta = np.array([0.0, 0.0, 0.4])
    np.testing.assert_allclose(
        rot.orientation_error(rot.rotvec_to_matrix(delta) @ cur, cur), delta, atol=1e-12
    )


# ---------------------------------------------------------------- properties
unit = (
    st.tuples(*[st.floats(-1, 1, allow_nan=False)] * 3)
    .map(np.array)
    .filter(lambda v: np.linalg.norm(v) > 1e-3)
    .map(lambda v: v / np.linalg.norm(v))
)
angle = st.one_of(
    st.floats(0.0, np.pi - 1e-6),
    st.floats(np.pi - 1e-6, np.pi - 1e-12),  # within 1e-6 of pi
    st.floats(0.0, 1e-6),  # within 1e-6 of 0
)


@settings(max_examples=300, deadline=None)
@given(unit, angle)
def test_rotvec_matrix_round_trip(axis: np.ndarray, a: float) -> None:
    v = axis * a
    R = rot.rotvec_to_matrix(v)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(rot.matrix_to_rotvec(R), v, atol=1e-9)
    np.testing.assert_allclose(rot.orientation_error(R, np.eye(3)), v, atol=1e-9)


@settings(max_examples=300, deadline=None)
@given(unit, angle)
def test_quaternion_round_trips(axis: np.ndarray, a: float) -> None:
    v = axis * a
    R = rot.rotvec_to_matrix(v)
    q = rot.matrix_to_quat_xyzw(R)
    assert np.linalg.norm(q) == pytest.approx(1.0) and q[3] >= 0.0
    np.testing.assert_allclose(q, rot.rotvec_to_quat_xyzw(v), atol=1e-12)
    np.testing.assert_allclose(rot.quat_xyzw_to_matrix(q), R, atol=1e-12)
    np.testing.assert_allclose(rot.quat_xyzw_to_rotvec(q), v, atol=1e-9)
    np.testing.assert_allclose(rot.quat_xyzw_to_rotvec(-q), v, atol=1e-9)  # q and -q: one rotation


@settings(max_examples=200, deadline=None)
@given(unit, st.floats(np.pi - 1e-6, np.pi))
def test_matrix_round_trip_at_and_near_pi(axis: np.ndarray, a: float) -> None:
    """Exactly at pi the sign of the vector is a free choice, but the rotation is not."""
    R = rot.rotvec_to_matrix(axis * a)
    np.testing.assert_allclose(rot.rotvec_to_matrix(rot.matrix_to_rotvec(R)), R, atol=1e-9)
    assert np.linalg.norm(rot.matrix_to_rotvec(R)) == pytest.approx(a, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(unit, angle, st.floats(0.1, 10.0))
def test_rot6d_round_trip_and_gram_schmidt(axis: np.ndarray, a: float, scale: float) -> None:
    R = rot.rotvec_to_matrix(axis * a)
    six = rot.matrix_to_rot6d(R)
    np.testing.assert_allclose(rot.rot6d_to_matrix(six), R, atol=1e-12)
    np.testing.assert_allclose(rot.rot6d_to_matrix(six * scale), R, atol=1e-12)  # scale-free
