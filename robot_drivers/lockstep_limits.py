"""Datasheet limits inside one control step of the lock-step twin: look ahead, shorten, check.

Why: the lock-step twin reproduces the simulator's control step exactly -- the joint target goes
to the stiff, torque-limited position servo at once and the physics runs ``substeps`` steps --
so that a checkpoint validated on it sees what it saw in training. That step-shaped target makes
the servo accelerate hard at the start of the period and slow down at its end: with
``velocity_scale`` 1.0 the safety layer keeps the *average* speed over the period at ``dq_max``,
yet measured on a joint 1 + joint 7 reversal joint 7 peaked at 1.09 x its speed limit between
two control steps while reading 0.89 at their ends, where the measured-state check looks.

Options weighed:

- shape the target over the period (a :class:`~robot_drivers.motion.ReferenceShaper` per
  physics step, as the real-time twin does): feasible by construction, but it changes the
  simulator's control law for *every* command, so no command would reproduce the simulator
  step for step any more, and checkpoints would be judged on dynamics they never trained on;
- check the measured joints at every physics step and e-stop: catches everything, but by
  itself ends an episode that a shorter move would have finished;
- what is done here: the physics is deterministic, so run the simulator's own step and check
  the joints after *every* physics step (:func:`within_limits`). Within the limits, that run
  is kept: the twin stays bitwise the simulator (parity needs no tolerance). Past them, the
  step is undone (``mj_setState`` of the integration state, then ``mj_step1``: a replay of the
  same step is bitwise the first run) and the move from the measured joints is shortened as a
  whole (direction kept, like the safety layer's speed limit) to the largest fraction whose
  run stays inside, found by bisection; every fraction kept was itself run and checked. Only
  commands that would leave the limits are changed. If even holding still (fraction 0) leaves
  them (an outside force, a joint already too fast), the run is kept and the caller e-stops on
  its per-physics-step check (:class:`~robot_drivers.lockstep.LockstepStepper`).

What it costs in parity: the simulator's own step leaves the speed limits on a few ordinary
commands too; measured on the language twin (6 episodes each of the scripted oracle, of actions
``N(0, 0.5)`` and of uniform actions), 5 of 449 steps peaked at 1.005-1.08 x a speed limit
mid-step and were shortened to 0.89-0.99 of their move; the other steps are bitwise the
simulator's.

The simulator's env (``sim_bridges.mujoco_franka``) is not changed: training and benchmark
dynamics stay what they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_drivers.types import PANDA_DQ_MAX, PANDA_Q_MAX, PANDA_Q_MIN


@dataclass(frozen=True)
class JointLimits:
    """Datasheet joint limits: positions (rad) and speeds (rad/s)."""

    q_min: tuple[float, ...] = PANDA_Q_MIN
    q_max: tuple[float, ...] = PANDA_Q_MAX
    dq_max: tuple[float, ...] = PANDA_DQ_MAX


def within_limits(q: np.ndarray, dq: np.ndarray, limits: JointLimits) -> bool:
    """Whether every row (one physics step) of ``q`` / ``dq`` ``[n, 7]`` lies inside ``limits``.

    >>> lim = JointLimits()
    >>> q = np.zeros((2, 7)); q[:, 3] = -1.0; dq = np.zeros((2, 7))
    >>> within_limits(q, dq, lim)
    True
    >>> dq[1, 6] = 2.62                        # joint 7's limit is 2.61 rad/s
    >>> within_limits(q, dq, lim)
    False
    """
    return bool(
        np.all(np.abs(dq) <= np.asarray(limits.dq_max))
        and np.all(q >= np.asarray(limits.q_min))
        and np.all(q <= np.asarray(limits.q_max))
    )


@dataclass(frozen=True)
class ControlStepRun:
    """One control step as run: the fraction of the commanded move used, the joint target sent
    to the servo, and the joints after each physics step (``[n, 7]`` positions, speeds)."""

    fraction: float
    target: np.ndarray
    q: np.ndarray
    dq: np.ndarray


class LimitedControlStep:
    """The simulator's control step of a :class:`~robot_drivers.sim_arm.MujocoArmBackend`,
    kept inside ``limits`` at every physics step (see the module docstring).

    ``iterations``: bisection steps on the move's fraction (resolution ``2**-iterations``).
    """

    def __init__(self, backend: Any, limits: JointLimits, iterations: int = 8) -> None:
        self.backend, self.limits, self.iterations = backend, limits, iterations
        mj, m = backend._mj, backend.fm.model
        self._spec = mj.mjtState.mjSTATE_INTEGRATION
        self._snapshot = np.empty(mj.mj_stateSize(m, self._spec))

    def run(self, n: int) -> ControlStepRun:
        """Advance one control step of ``n`` physics steps towards the servo's present target."""
        b = self.backend
        with b._lock:
            arm_act = b.fm.arm_act
            start = b.data.qpos[b.fm.arm_qpos].copy()
            target = b.data.ctrl[arm_act].copy()
            b._mj.mj_getState(b.fm.model, b.data, self._snapshot, self._spec)
            q, dq = b.step_control(n)
            if within_limits(q, dq, self.limits):
                return ControlStepRun(1.0, target, q, dq)
            lo, hi = (
                0.0,
                1.0,
            )  # fraction hi leaves the limits; lo is the largest found inside (0: untried)
            best: tuple[np.ndarray, np.ndarray] | None = None
            last_kept = False  # whether the physics now holds the run of fraction lo
            for _ in range(self.iterations):
                mid = 0.5 * (lo + hi)
                q, dq = self._rerun(n, start + mid * (target - start))
                last_kept = within_limits(q, dq, self.limits)
                if last_kept:
                    lo, best = mid, (q, dq)
                else:
                    hi = mid
            sent = start + lo * (target - start)
            if best is None or not last_kept:
                best = self._rerun(n, sent)
            b._goal = sent.copy()
            return ControlStepRun(lo, sent, *best)

    def _rerun(self, n: int, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Undo the step just run and run it again towards ``target`` (bitwise replayable)."""
        b = self.backend
        m, d = b.fm.model, b.data
        b._mj.mj_setState(m, d, self._snapshot, self._spec)
        b._mj.mj_step1(m, d)  # the position / velocity stage the step sequence starts after
        d.ctrl[b.fm.arm_act] = target
        return b.step_control(n)
