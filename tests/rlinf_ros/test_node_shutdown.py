"""A node stops on SIGTERM in bounded time: cleanly, or, when its teardown hangs, with a stack dump.

Real process, real rclpy: :func:`rlinf_ros.nodes.common.run_node` with a node whose ``close``
either returns or never does, or whose middleware teardown blocks after ``close`` finished. A
launcher (``rlinf ros up``) or a test must see a stopped node
and where it hung, never a process it has to SIGKILL with no trace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import ROOT

pytestmark = [pytest.mark.ros, pytest.mark.timeout(90)]

NODE = textwrap.dedent("""
    import sys, time
    from rclpy.node import Node
    from rlinf_ros.nodes.common import run_node

    class Stub(Node):
        def __init__(self):
            super().__init__("shutdown_probe")
            self.create_timer(0.05, lambda: None)
            print("UP", flush=True)

        def close(self):
            if sys.argv[1] == "hang":
                while True:
                    time.sleep(0.5)  # a driver that never lets go

        def destroy_node(self):
            if sys.argv[1] == "stuck_middleware":
                while True:
                    time.sleep(0.5)  # a DDS teardown that blocks after close() finished
            super().destroy_node()

    raise SystemExit(run_node("probe", lambda cfg, name: Stub(),
                              ["--config", "configs/ros_sim_franka.yaml"], shutdown_grace_s=2.0))
""")


def _start_and_term(mode: str) -> tuple[int, float, str]:
    p = subprocess.Popen(
        [sys.executable, "-c", NODE, mode],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert "UP" in line, (
            line + p.stdout.read()
        )  # built: run_node's signal handlers are installed
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        code = p.wait(timeout=60)
        return code, time.monotonic() - t0, p.stdout.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_node_stops_cleanly_on_sigterm(ros_domain_id) -> None:
    code, _, out = _start_and_term("clean")
    assert code == 0, out
    assert "probe node stopped" in out
    assert "Timeout" not in out


def test_a_hung_teardown_exits_1_with_every_threads_stack(ros_domain_id) -> None:
    code, took, out = _start_and_term("hang")
    assert code == 1, out
    assert took > 1.5, took  # the watchdog gave the teardown its grace first
    assert "probe node stopped" not in out
    assert "Timeout (0:00:02)!" in out and "in close" in out, out


def test_a_stuck_middleware_teardown_after_close_is_a_clean_stop_with_its_stack(
    ros_domain_id,
) -> None:
    code, _, out = _start_and_term("stuck_middleware")
    assert code == 0, out  # the node's own close finished: the stop is clean
    assert "middleware's teardown" in out and "in destroy_node" in out, out  # where it stuck
    assert "probe node stopped" in out and "Timeout" not in out, out
