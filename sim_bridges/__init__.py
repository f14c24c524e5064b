"""Simulators behind one batched vector-env contract (:mod:`rlinf_contracts.env`).

Pick one by name through :func:`rlinf_contracts.env_registry.make_env` (simulators import lazily):

- ``mujoco_franka/<reach|push|lift>`` — the embedded default, a Franka Panda in MuJoCo
  (:mod:`sim_bridges.mujoco_franka`); also ``FrankaScene`` for single-robot drivers;
- ``robosuite/<Task>`` — any ``robosuite.make`` task (:mod:`sim_bridges.robosuite_bridge`);
- ``maniskill/<Task-v1>`` — ManiSkill3, CPU or GPU-batched (:mod:`sim_bridges.maniskill_bridge`);
- ``libero/<suite>`` — LIBERO suites (:mod:`sim_bridges.libero_bridge`);
- ``isaaclab/<Isaac-...>`` — IsaacLab, GPU only (:mod:`sim_bridges.isaaclab_bridge`).

One-env-at-a-time simulators reuse :class:`sim_bridges.loop_env.LoopVectorEnv` for chunking,
auto-reset and episode statistics. ``tests/sim_bridges/conformance.py`` checks any bridge.
"""
