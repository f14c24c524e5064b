"""Joint reference shaping: turn a target into a motion the arm can follow without overshoot.

Why: the safety layer limits the *target*, but a position servo handed a jump in its target
(each driver tick moves it by up to ``dq_max * period``) saturates its torque and overshoots:
measured on the MuJoCo Panda, a target ramping to joint 7's limit at full speed drove the joint
to 1.68 x its speed limit and 0.015 rad past its position limit. Between the target and the
servo every backend that runs its own servo loop (the simulated arm per physics step, the
libfranka arm per 1 ms cycle) puts a :class:`ReferenceShaper`: per joint, the reference moves
at most ``speed_fraction * dq_max``, changes speed at most ``ddq_max`` per second, and brakes
in time to stop on its goal, which always lies inside the position limits. A servo following
such a reference stays within the limits the reference keeps (with the headroom of
``speed_fraction``).

>>> import numpy as np
>>> s = ReferenceShaper(np.zeros(7), speed_fraction=0.9)
>>> goal = np.full(7, 10.0)                    # far beyond every limit
>>> for _ in range(4000):
...     q = s.step(0.001, goal=goal)
>>> bool(np.all(q <= np.asarray(PANDA_Q_MAX) - s.margin + 1e-12)), bool(np.all(s.velocity == 0.0))
(True, True)
"""

from __future__ import annotations

import numpy as np

from robot_drivers.types import PANDA_DDQ_MAX, PANDA_DQ_MAX, PANDA_Q_MAX, PANDA_Q_MIN


def stopping_speed(distance: np.ndarray, ddq_max: np.ndarray, dt: float) -> np.ndarray:
    """Highest speed from which a joint, braking at ``ddq_max`` in steps of ``dt``, stops within
    ``distance`` (>= 0): the root of ``v * dt + v**2 / (2 * ddq_max) = distance``.

    >>> float(stopping_speed(np.array([0.5]), np.array([1.0]), 0.0)[0])   # sqrt(2 a d)
    1.0
    """
    d = np.maximum(np.asarray(distance, dtype=np.float64), 0.0)
    a = np.asarray(ddq_max, dtype=np.float64)
    return a * (np.sqrt(dt * dt + 2.0 * d / a) - dt)


class ReferenceShaper:
    """Per-joint velocity- and acceleration-limited reference that stops on its goal.

    ``step(dt, goal=q)`` moves towards a joint goal; ``step(dt, velocity=dq)`` runs at a joint
    velocity (both clipped to the position limits minus ``margin``, where the reference brakes
    to a stop). :meth:`reset` puts the reference at rest on the measured joints (hold, e-stop,
    episode reset).
    """

    def __init__(
        self,
        q: np.ndarray,
        q_min: tuple[float, ...] = PANDA_Q_MIN,
        q_max: tuple[float, ...] = PANDA_Q_MAX,
        dq_max: tuple[float, ...] = PANDA_DQ_MAX,
        ddq_max: tuple[float, ...] = PANDA_DDQ_MAX,
        speed_fraction: float = 0.9,
        margin: float = 0.01,
    ) -> None:
        if not 0.0 < speed_fraction <= 1.0:
            raise ValueError(f"speed_fraction must be in (0, 1], got {speed_fraction}")
        self.lo = np.asarray(q_min, dtype=np.float64) + margin
        self.hi = np.asarray(q_max, dtype=np.float64) - margin
        self.v_max = np.asarray(dq_max, dtype=np.float64) * speed_fraction
        self.a_max = np.asarray(ddq_max, dtype=np.float64)
        self.margin = margin
        self.position = np.asarray(q, dtype=np.float64).copy()
        self.velocity = np.zeros_like(self.position)

    def reset(self, q: np.ndarray) -> None:
        """At rest on ``q`` (the next motion starts from zero speed)."""
        self.position = np.asarray(q, dtype=np.float64).copy()
        self.velocity = np.zeros_like(self.position)

    def follow(self, q: np.ndarray, dq: np.ndarray) -> None:
        """Track a motion run without the shaper (measured joints and speeds), so that it takes
        over from there, clipped to its own limits."""
        self.position = np.clip(np.asarray(q, dtype=np.float64), self.lo, self.hi)
        self.velocity = np.clip(np.asarray(dq, dtype=np.float64), -self.v_max, self.v_max)

    def step(
        self,
        dt: float,
        goal: np.ndarray | None = None,
        velocity: np.ndarray | None = None,
        ddq_max: np.ndarray | None = None,
    ) -> np.ndarray:
        """Advance ``dt`` seconds towards ``goal`` (or at ``velocity``); returns the new reference.
        ``ddq_max``: a lower acceleration limit for this step (what the servo's torque allows in
        the present pose), never above the shaper's own."""
        x, v = self.position, self.velocity
        a = self.a_max if ddq_max is None else np.minimum(self.a_max, ddq_max)
        if goal is not None:
            d = np.clip(np.asarray(goal, dtype=np.float64), self.lo, self.hi) - x
            want = np.sign(d) * np.minimum(self.v_max, stopping_speed(np.abs(d), a, dt))
        else:
            want = np.clip(np.asarray(velocity, dtype=np.float64), -self.v_max, self.v_max)
        # never faster towards a position limit than the arm can still stop before it
        want = np.minimum(want, stopping_speed(self.hi - x, a, dt))
        want = np.maximum(want, -stopping_speed(x - self.lo, a, dt))
        v_new = v + np.clip(want - v, -a * dt, a * dt)
        x_new = x + v_new * dt
        if goal is not None:  # arrive exactly: no crossing of the goal from rounding
            crossed = (d != 0.0) & ((x + d - x_new) * d <= 0.0)
            x_new = np.where(crossed, x + d, x_new)
            v_new = np.where(crossed, 0.0, v_new)
        x_new = np.clip(x_new, self.lo, self.hi)
        v_new = np.where(
            (x_new == self.lo) & (v_new < 0) | (x_new == self.hi) & (v_new > 0), 0.0, v_new
        )
        self.position, self.velocity = x_new, v_new
        return x_new.copy()
