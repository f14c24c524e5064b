"""Scripted expert actions for any Franka env, in that env's own action layout.

Each task's ``oracle`` says where the EE should go (metres) and what the gripper should do;
this module turns that into normalised actions for ``ee_delta``, ``ee_delta_pos``,
``ee_impedance`` (the displacement moves the impedance target) or ``joint_delta`` control.
Used by tests (success is reachable), DAgger and teleop baselines.
"""

from __future__ import annotations

import numpy as np

from rlinf_contracts.rotations import orientation_error
from sim_bridges.mujoco_franka.control import dls_step, site_jacobians, site_rotations
from sim_bridges.mujoco_franka.vector_env import FrankaVectorEnv


def oracle_action(
    env: FrankaVectorEnv, noise: float = 0.0, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Expert actions ``[B, A]`` (float32, in [-1, 1]) for the env's current state.

    ``noise`` adds Gaussian noise of that std (normalised units) for diverse demonstrations.
    """
    wants = np.stack(
        [env.task.oracle(fm, d, d.site_xpos[fm.ee_site]) for fm, d in zip(env.fms, env.datas)]
    )
    delta, grip = wants[:, :3], wants[:, 3]
    ctl = env.control
    if ctl.mode == "joint_delta":
        # hold the orientation of the episode start while moving, like the EE modes do
        jac = site_jacobians(env.fms[0], env.datas)
        q = np.stack([d.qpos[fm.arm_qpos] for fm, d in zip(env.fms, env.datas)])
        cur = site_rotations(env.fms[0], env.datas)
        err = np.concatenate([delta, orientation_error(env._target_rot, cur)], axis=1)
        arm = dls_step(jac, err, q, ctl.damping, 0.0) / ctl.joint_scale
    else:
        arm = delta / ctl.pos_scale
        if ctl.mode == "ee_delta":
            arm = np.concatenate([arm, np.zeros_like(arm)], axis=1)
    act = np.concatenate([arm, grip[:, None]], axis=1)
    if noise > 0:
        act = act + (rng or np.random.default_rng()).normal(0.0, noise, size=act.shape)
    return np.clip(act, -1.0, 1.0).astype(np.float32)
