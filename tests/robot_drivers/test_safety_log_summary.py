"""Safety events of a nominal run: the first of a kind logged at once, repeats summarised."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from robot_drivers.safety import SafetyConfig, SafetyLayer, describe_event
from robot_drivers.types import PANDA_HOME


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_minute_of_velocity_clamps_is_two_lines_not_one_per_clamp(caplog) -> None:
    clock = Clock()
    layer = SafetyLayer(SafetyConfig(max_joint_step=10.0, velocity_scale=0.5), clock=clock)
    q = np.array(PANDA_HOME)
    target = q.copy()
    target[1] += 0.5  # too fast for 0.1 s at half speed: a velocity clamp every command
    with caplog.at_level(logging.WARNING, logger="robot_drivers.safety"):
        for k in range(600):  # 10 Hz for 60 s
            clock.t = 100.0 + k * 0.1
            layer.filter_joint_positions(target, q, dt=0.1)
            layer.check_measured(q, np.zeros(7))  # the periodic read polls the summary
            layer.forget_target()
    lines = [r.getMessage() for r in caplog.records]
    assert layer.counters["velocity_limit"] == 600
    # before: one line per second per kind (60 here, 673 warnings in a nominal robot run)
    assert lines[0].startswith("[arm] safety velocity_limit: ")
    assert lines[1:] == ["[arm] safety: 300 velocity clamps in the last 30 s"]
    assert layer.events.pending["velocity_limit"] == 299  # the next window is still open


@pytest.mark.parametrize(
    "kind,n,text",
    [
        ("velocity_limit", 1, "1 velocity clamp"),
        ("workspace", 3, "3 workspace clamps"),
        ("estop_refused", 2, "2 x estop_refused"),
    ],
)
def test_counts_are_worded_per_kind(kind: str, n: int, text: str) -> None:
    assert describe_event(kind, n) == text
