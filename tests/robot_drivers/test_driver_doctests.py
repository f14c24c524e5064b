"""The docstring examples of the drivers are executed (docs that drift from code fail here)."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["robot_drivers.kinematics", "robot_drivers.arm"])
def test_docstring_examples_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
