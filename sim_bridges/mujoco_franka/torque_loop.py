"""The simulated torque loop of ``ee_impedance`` control, and per-substep contact force.

Why its own module: position-controlled modes set one joint target per control step and let
``mj_step`` track it in C. Impedance control must evaluate its law on every physics substep
(as libfranka's torque callback does every millisecond), so the vector env steps those envs
substep by substep and this module holds what that loop needs between substeps: each env's
impedance target and last commanded torque (for the rate limit). The law itself is
:func:`rlinf_contracts.impedance.impedance_torques`, shared with the robot side.

Per substep and env: ``ctrl[arm] = law torques`` (torque motors, see :mod:`.model`) and
``qfrc_applied = qfrc_bias`` on the arm and finger joints, MuJoCo's gravity + Coriolis force,
the compensation the real arm's firmware / backend adds to a commanded torque.
"""

from __future__ import annotations

import mujoco
import numpy as np

from rlinf_contracts.impedance import ImpedanceGains, impedance_torques, step_target
from sim_bridges.mujoco_franka.control import site_jacobians
from sim_bridges.mujoco_franka.model import HOME_QPOS, FrankaModel


def compensated_dofs(fm: FrankaModel) -> np.ndarray:
    """Dof addresses of the arm and finger joints (what the bias force is applied to)."""
    m = fm.model
    fingers = [int(m.jnt_dofadr[j]) for j in range(m.njnt) if m.jnt_qposadr[j] in fm.grip_qpos]
    return np.concatenate([np.asarray(fm.arm_dof), np.array(fingers, dtype=int)])


class ImpedanceLoop:
    """Impedance targets and last torques of ``num_envs`` envs; :meth:`torques` evaluates the
    law for a batch of them from their current (``mj_step1``-fresh) kinematics."""

    def __init__(
        self,
        gains: ImpedanceGains,
        num_envs: int,
        pos_scale: float,
        physics_dt: float,
        use_mass_matrix: bool = True,
    ) -> None:
        self.gains = gains
        self.pos_scale = pos_scale
        self.dt = physics_dt
        self.use_mass_matrix = use_mass_matrix
        self.target_pos = np.zeros((num_envs, 3))
        self.target_rot = np.tile(np.eye(3), (num_envs, 1, 1))
        self.tau = np.zeros((num_envs, 7))
        self._dofs: np.ndarray | None = None

    def reset(self, i: int, fm: FrankaModel, d: mujoco.MjData, target_rot: np.ndarray) -> None:
        """Env ``i`` begins an episode: target = its current pose, no torque commanded yet."""
        self.target_pos[i] = d.site_xpos[fm.ee_site]
        self.target_rot[i] = target_rot
        self.tau[i] = 0.0
        d.ctrl[fm.arm_act] = 0.0
        d.qfrc_applied[:] = 0.0

    def set_targets(self, ids: list[int], ee_pos: np.ndarray, actions_xyz: np.ndarray) -> None:
        """An ``ee_impedance`` action per env: target = measured EE + ``pos_scale`` x action
        (orientation target held)."""
        self.target_pos[ids] = step_target(ee_pos, actions_xyz, self.pos_scale)

    def torques(self, fm: FrankaModel, datas: list[mujoco.MjData], ids: list[int]) -> np.ndarray:
        """The law's torques ``[n, 7]`` for envs ``ids`` (``datas`` in the same order); also
        remembered as their last command."""
        q = np.stack([d.qpos[fm.q_slice] for d in datas])
        dq = np.stack([d.qvel[fm.dof_slice] for d in datas])
        pos = np.stack([d.site_xpos[fm.ee_site] for d in datas])
        rot = np.stack([d.site_xmat[fm.ee_site] for d in datas]).reshape(-1, 3, 3)
        mass = None
        if self.use_mass_matrix:
            nv = fm.model.nv
            full = np.zeros((len(datas), nv, nv))
            for j, d in enumerate(datas):
                mujoco.mj_fullM(fm.model, full[j], d.qM)
            mass = full[:, fm.arm_dof][:, :, fm.arm_dof]
        tau = impedance_torques(
            self.gains,
            q,
            dq,
            pos,
            rot,
            site_jacobians(fm, datas),
            self.target_pos[ids],
            self.target_rot[ids],
            HOME_QPOS,
            mass=mass,
            tau_prev=self.tau[ids],
            dt=self.dt,
        )
        self.tau[ids] = tau
        return tau

    def apply(self, fm: FrankaModel, d: mujoco.MjData, tau: np.ndarray) -> None:
        """Write one env's torques and its bias-force compensation before ``mj_step2``."""
        if self._dofs is None:
            self._dofs = compensated_dofs(fm)
        d.ctrl[fm.arm_act] = tau
        d.qfrc_applied[self._dofs] = d.qfrc_bias[self._dofs]


def contact_force(model: mujoco.MjModel, d: mujoco.MjData, geoms: np.ndarray) -> float:
    """Sum of the normal contact forces (N) on the geoms ``geoms`` (e.g. a fixture)."""
    n = d.ncon
    if n == 0 or len(geoms) == 0:
        return 0.0
    pairs = d.contact.geom[:n]
    hit = np.flatnonzero(np.isin(pairs, geoms).any(axis=1))
    total = 0.0
    out = np.zeros(6)
    for c in hit.tolist():
        mujoco.mj_contactForce(model, d, c, out)
        total += abs(out[0])
    return total
