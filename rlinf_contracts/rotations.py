"""The one rotation-math module: rotation vectors, matrices, quaternions and 6-D rotations.

Why one module: the simulator controllers, the robot drivers' IK and the LIBERO state mapping
all convert between rotation forms; separate copies drifted apart exactly where it is hard
(an angle near pi, where ``R - R^T`` vanishes and the axis must come from ``R + R^T``). Here
every conversion is written once, in numpy, batched over any leading axes, and tested against
exact values and round trips (``tests/rlinf_contracts/test_rotations.py``).

Conventions:

- rotation vector (axis-angle) ``[..., 3]``: unit axis times angle in radians, angle in
  ``[0, pi]`` on output;
- matrix ``[..., 3, 3]``: rotates column vectors, ``world_from_body``;
- quaternion ``[..., 4]`` is **xyzw, as in ROS** (``geometry_msgs/Quaternion``, robosuite,
  SciPy) unless a name says ``wxyz`` (MuJoCo); outputs are unit and have ``w >= 0``;
- rot6d ``[..., 6]``: the first two *columns* of the matrix, column 0 then column 1 (the order
  of the MuJoCo Franka state vector, ``ee_rot6d``).

>>> import numpy as np
>>> R = rotvec_to_matrix(np.array([0.0, 0.0, np.pi / 2]))
>>> np.round(R @ [1.0, 0.0, 0.0], 12) + 0.0
array([0., 1., 0.])
>>> np.round(matrix_to_quat_xyzw(R), 6).tolist()
[0.0, 0.0, 0.707107, 0.707107]
>>> np.round(matrix_to_rotvec(rotvec_to_matrix(np.array([np.pi - 1e-7, 0, 0]))), 9).tolist()
[3.141592554, 0.0, 0.0]
"""

from __future__ import annotations

import numpy as np

_EYE3 = np.eye(3)
# within this distance of pi the rotation vector comes from the symmetric part of R: the
# general formula divides the skew part by 2 sin(angle) and its error grows like eps / (pi - a)^2
_NEAR_PI = 0.5


def _batched(x: np.ndarray, tail: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, ...]]:
    """``x`` as float64 ``[N, *tail]`` and its leading shape, so every function accepts one
    rotation or any batch of them."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.shape[arr.ndim - len(tail) :] != tail:
        raise ValueError(
            f"expected an array of shape [..., {', '.join(map(str, tail))}], got {arr.shape}"
        )
    lead = arr.shape[: arr.ndim - len(tail)]
    return arr.reshape((-1, *tail)), lead


def skew(v: np.ndarray) -> np.ndarray:
    """Cross-product matrices ``[..., 3, 3]`` of vectors ``[..., 3]`` (``skew(a) @ b == a x b``)."""
    flat, lead = _batched(v, (3,))
    k = np.zeros((len(flat), 3, 3))
    x, y, z = flat.T
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -z, y, -x
    k[:, 1, 0], k[:, 2, 0], k[:, 2, 1] = z, -y, x
    return k.reshape((*lead, 3, 3))


def rotvec_to_matrix(rotvec: np.ndarray) -> np.ndarray:
    """Rodrigues' formula: rotation vectors ``[..., 3]`` -> matrices ``[..., 3, 3]``.

    Written with the unnormalised cross matrix so a zero vector needs no axis: the
    coefficients ``sin(a)/a`` and ``(1 - cos(a))/a^2`` take their limits 1 and 1/2 near 0.
    """
    flat, lead = _batched(rotvec, (3,))
    angle = np.linalg.norm(flat, axis=1)[:, None, None]
    k = skew(flat)
    small = angle < 1e-9
    safe = np.where(small, 1.0, angle)
    a = np.where(small, 1.0, np.sin(safe) / safe)
    b = np.where(small, 0.5, (1.0 - np.cos(safe)) / safe**2)
    return (_EYE3 + a * k + b * (k @ k)).reshape((*lead, 3, 3))


def _skew_part(mats: np.ndarray) -> np.ndarray:
    """``vee(R - R^T) = 2 sin(angle) axis`` of matrices ``[N, 3, 3]``."""
    return np.stack(
        [
            mats[:, 2, 1] - mats[:, 1, 2],
            mats[:, 0, 2] - mats[:, 2, 0],
            mats[:, 1, 0] - mats[:, 0, 1],
        ],
        axis=1,
    )


def _rotvec_near_pi(mats: np.ndarray, skew_vec: np.ndarray) -> np.ndarray:
    """Rotation vectors of matrices whose angle is near pi, from ``(R + R^T)/2 - cos I =
    (1 - cos) axis axis^T``: its largest column is a well-conditioned multiple of the axis;
    the sign comes from the (small but nonzero below pi) skew part."""
    cos = (np.trace(mats, axis1=1, axis2=2) - 1.0) / 2.0
    angle = np.arctan2(np.linalg.norm(skew_vec, axis=1) / 2.0, cos)
    outer = (mats + np.swapaxes(mats, 1, 2)) / 2.0 - cos[:, None, None] * _EYE3
    col = np.argmax(np.diagonal(outer, axis1=1, axis2=2), axis=1)
    axis = outer[np.arange(len(mats)), :, col]
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    flip = np.einsum("ij,ij->i", axis, skew_vec) < 0.0
    axis[flip] *= -1.0
    return axis * angle[:, None]


def matrix_to_rotvec(mats: np.ndarray) -> np.ndarray:
    """Inverse of :func:`rotvec_to_matrix`: matrices ``[..., 3, 3]`` -> rotation vectors
    ``[..., 3]`` with angle in ``[0, pi]``, accurate near 0 and near pi (where the axis is
    taken from the symmetric part; exactly at pi, ``v`` and ``-v`` are the same rotation)."""
    flat, lead = _batched(mats, (3, 3))
    cos = np.clip((np.trace(flat, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(cos)
    skew_vec = _skew_part(flat)
    sin = np.sin(angle)
    # sin < 1e-6 only near 0 here (near pi is handled below): angle / (2 sin) -> 1/2
    scale = np.where(sin < 1e-6, 0.5, angle / (2.0 * np.where(sin < 1e-6, 1.0, sin)))
    out = skew_vec * scale[:, None]
    near_pi = angle > np.pi - _NEAR_PI
    if near_pi.any():
        out[near_pi] = _rotvec_near_pi(flat[near_pi], skew_vec[near_pi])
    return out.reshape((*lead, 3))


def orientation_error(target: np.ndarray, current: np.ndarray) -> np.ndarray:
    """World-frame rotation vectors ``[..., 3]`` taking ``current`` to ``target`` (both
    ``[..., 3, 3]``): ``target = rotvec_to_matrix(err) @ current``."""
    return matrix_to_rotvec(np.asarray(target) @ np.swapaxes(np.asarray(current), -1, -2))


def quat_xyzw_to_matrix(quat: np.ndarray) -> np.ndarray:
    """Quaternions ``[..., 4]`` (x, y, z, w; normalised here) -> matrices ``[..., 3, 3]``."""
    flat, lead = _batched(quat, (4,))
    norm = np.linalg.norm(flat, axis=1, keepdims=True)
    if np.any(norm < 1e-12):
        raise ValueError("quat_xyzw_to_matrix: a quaternion has zero norm; it is no rotation")
    x, y, z, w = (flat / norm).T
    out = np.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - z * w),
            2 * (x * z + y * w),
            2 * (x * y + z * w),
            1 - 2 * (x * x + z * z),
            2 * (y * z - x * w),
            2 * (x * z - y * w),
            2 * (y * z + x * w),
            1 - 2 * (x * x + y * y),
        ],
        axis=1,
    )
    return out.reshape((*lead, 3, 3))


def matrix_to_quat_xyzw(mats: np.ndarray) -> np.ndarray:
    """Matrices ``[..., 3, 3]`` -> unit quaternions ``[..., 4]`` (x, y, z, w) with ``w >= 0``.

    Shepperd's method: of the four ways to extract the quaternion, use the one dividing by the
    largest of ``|w|, |x|, |y|, |z|``, so no angle loses precision.
    """
    m, lead = _batched(mats, (3, 3))
    tr = np.trace(m, axis1=1, axis2=2)
    d0, d1, d2 = m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]
    sx, sy, sz = m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1]
    px, py, pz = m[:, 2, 1] + m[:, 1, 2], m[:, 0, 2] + m[:, 2, 0], m[:, 1, 0] + m[:, 0, 1]
    # candidate rows (x, y, z, w), each 4 * (its largest component) * quaternion
    cands = np.stack(
        [
            np.stack([sx, sy, sz, 1.0 + tr], axis=1),
            np.stack([1.0 + d0 - d1 - d2, pz, py, sx], axis=1),
            np.stack([pz, 1.0 - d0 + d1 - d2, px, sy], axis=1),
            np.stack([py, px, 1.0 - d0 - d1 + d2, sz], axis=1),
        ],
        axis=1,
    )
    pick = np.argmax(np.stack([tr, d0, d1, d2], axis=1), axis=1)
    q = cands[np.arange(len(m)), pick]
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    q[q[:, 3] < 0] *= -1.0
    return q.reshape((*lead, 4))


def quat_xyzw_to_rotvec(quat: np.ndarray) -> np.ndarray:
    """Quaternions ``[..., 4]`` (x, y, z, w) -> rotation vectors (axis-angle) ``[..., 3]`` with
    angle in ``[0, pi]`` (``q`` and ``-q`` give the same result). ``atan2`` keeps the angle
    accurate at both ends, unlike ``2 acos(w)`` near 0."""
    flat, lead = _batched(quat, (4,))
    q = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    q[q[:, 3] < 0] *= -1.0
    xyz, w = q[:, :3], q[:, 3]
    s = np.linalg.norm(xyz, axis=1)
    small = s < 1e-12
    # angle / s = 2 atan2(s, w) / s -> 2 / w as s -> 0 (w -> 1 there)
    scale = np.where(
        small, 2.0 / np.maximum(w, 1e-12), 2.0 * np.arctan2(s, w) / np.where(small, 1.0, s)
    )
    return (xyz * scale[:, None]).reshape((*lead, 3))


def rotvec_to_quat_xyzw(rotvec: np.ndarray) -> np.ndarray:
    """Rotation vectors ``[..., 3]`` -> unit quaternions ``[..., 4]`` (x, y, z, w), ``w >= 0``
    for angles up to pi."""
    flat, lead = _batched(rotvec, (3,))
    angle = np.linalg.norm(flat, axis=1)
    small = angle < 1e-6
    # sin(a/2) / a -> 1/2 - a^2/48 near 0
    coef = np.where(small, 0.5 - angle**2 / 48.0, np.sin(angle / 2.0) / np.where(small, 1.0, angle))
    q = np.concatenate([flat * coef[:, None], np.cos(angle / 2.0)[:, None]], axis=1)
    return q.reshape((*lead, 4))


def quat_wxyz_to_xyzw(quat: np.ndarray) -> np.ndarray:
    """MuJoCo order (w, x, y, z) -> ROS order (x, y, z, w), any leading shape."""
    q = np.asarray(quat, dtype=np.float64)
    return np.concatenate([q[..., 1:], q[..., :1]], axis=-1)


def quat_xyzw_to_wxyz(quat: np.ndarray) -> np.ndarray:
    """ROS order (x, y, z, w) -> MuJoCo order (w, x, y, z), any leading shape."""
    q = np.asarray(quat, dtype=np.float64)
    return np.concatenate([q[..., 3:], q[..., :3]], axis=-1)


def matrix_to_rot6d(mats: np.ndarray) -> np.ndarray:
    """Matrices ``[..., 3, 3]`` -> rot6d ``[..., 6]``: column 0 then column 1 (a continuous
    representation for learning, Zhou et al. 2019)."""
    m = np.asarray(mats, dtype=np.float64)
    return np.concatenate([m[..., :, 0], m[..., :, 1]], axis=-1)


def rot6d_to_matrix(rot6d: np.ndarray) -> np.ndarray:
    """rot6d ``[..., 6]`` -> matrices ``[..., 3, 3]`` by Gram-Schmidt, so any (non-degenerate)
    network output maps to a rotation; exact inverse of :func:`matrix_to_rot6d`."""
    flat, lead = _batched(rot6d, (6,))
    a1, a2 = flat[:, :3], flat[:, 3:]
    b1 = a1 / np.linalg.norm(a1, axis=1, keepdims=True)
    b2 = a2 - np.einsum("ij,ij->i", b1, a2)[:, None] * b1
    b2 /= np.linalg.norm(b2, axis=1, keepdims=True)
    b3 = np.cross(b1, b2)
    return np.stack([b1, b2, b3], axis=2).reshape((*lead, 3, 3))
