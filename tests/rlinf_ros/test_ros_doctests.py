"""The docstring examples of rlinf_ros are executed (docs that drift from code fail here)."""

from __future__ import annotations

import doctest
import importlib

import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")


@pytest.mark.parametrize("module", ["rlinf_ros.sync", "rlinf_ros.conversions"])
def test_docstring_examples_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
