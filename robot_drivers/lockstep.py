"""The lock-step twin's arm: one simulator control step per action.

The mode ``robot.scene.lockstep`` of the sim twin, for validating a checkpoint on the ROS graph
exactly as the simulator would have run it; the datasheet limits inside each step are
:mod:`robot_drivers.lockstep_limits`'s.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from robot_drivers.lockstep_limits import JointLimits, LimitedControlStep
from robot_drivers.safety import LIMIT_ESTOP


class LockstepStepper:
    """A simulated arm with a scene stepped like the simulator: one control step per action.

    Why: a twin that validates a checkpoint must make a step mean what a simulator step means.
    Measured on an open-loop replay (same episode, same 40 actions): a twin following its
    commands in real time (target ramped over a period, sampled by the 100 Hz driver, physics
    following wall time) is off the simulator's state by 0.14 after the first step; this
    stepper reproduces it to 1e-4 and its camera frames pixel for pixel.

    Per action: the safety layer filters the joint target with the speed limit taken from the
    measured joints (as the simulator's control law does; the arm has a whole control period
    to get there) on a clock that advances one control period per step, the target goes to
    the actuators at once, and the physics runs ``substeps`` steps
    (:meth:`MujocoArmBackend.step_control`). The datasheet limits (the safety config's ``q_min`` /
    ``q_max`` / ``dq_max``) hold at every physics step, not only where a control step ends
    (:mod:`robot_drivers.lockstep_limits`): a step that would leave them is undone and its move
    shortened (``substep_limit``); a joint still past them at any physics step e-stops the arm
    (``limit_violation``).
    """

    def __init__(self, arm: Any) -> None:
        self.arm, self.backend = arm, arm.backend
        scene = self.backend.scene
        if scene is None or not hasattr(scene, "substeps"):
            raise ValueError(
                "lock-step needs a simulated arm running a simulator scene (arms[*].scene)"
            )
        self.period, self.substeps = float(scene.control_period_s), int(scene.substeps)
        self.clock = 0.0  # control periods stepped: the arm's and its safety layer's clock
        self.backend.lockstep = True
        arm._clock = arm.safety._clock = lambda: self.clock
        arm.command_period_s = self.period
        cfg = arm.safety.cfg
        self.control_step = LimitedControlStep(
            self.backend, JointLimits(cfg.q_min, cfg.q_max, cfg.dq_max)
        )
        self.steps = 0  # control steps of this episode
        self.success_step: int | None = None  # the first step the scene's success test held

    def reset(self) -> None:
        """A new episode (after the scene's reset)."""
        self.steps, self.success_step = 0, None
        self.arm.safety.forget_target()

    def apply(self, q: np.ndarray, gripper_width: float | None) -> Any:
        """One action: joint target ``q`` [7] and gripper width (m, None: unchanged); returns the
        safety outcome (refused: nothing moved, no step)."""
        self.arm.safety.forget_target()  # speed limit from the measured joints, as the control law
        out = self.arm.move_joints(np.asarray(q, dtype=np.float64))
        if out.refused:
            return out
        if gripper_width is not None:
            self.arm.gripper_move(float(gripper_width))
        self.clock += self.period
        run = self.control_step.run(self.substeps)
        if run.fraction < 1.0:
            self.arm.safety.record(
                "substep_limit",
                "the simulator's step would take a joint past its datasheet "
                f"limits between two control steps; move shortened to {run.fraction:.3f}",
            )
            out = dataclasses.replace(
                out, target=run.target, events=out.events + ("substep_limit",)
            )
        self._check_substeps(run.q, run.dq)
        self.steps += 1
        if self.success_step is None and self.backend.scene.success():
            self.success_step = self.steps
        return out

    def _check_substeps(self, q: np.ndarray, dq: np.ndarray) -> None:
        """The driver's measured-state check (:meth:`SafetyLayer.check_measured`) at every physics
        step of the control step just run: a violation e-stops the arm, as once per driver tick."""
        safety = self.arm.safety
        for qk, dqk in zip(q, dq):
            reason = safety.check_measured(qk, dqk)
            if reason is not None:
                safety.record("limit_violation", reason)
                self.arm.estop(f"{LIMIT_ESTOP}: {reason}")
                return
