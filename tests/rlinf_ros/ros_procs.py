"""Helpers to run node graphs as real processes in tests and benchmarks (always cleaned up), and
the stand-in nodes those tests start as scripts (:func:`spin_standin`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def spin_standin(make_node: Callable[[], Any]) -> None:
    """A stand-in node's script body: rclpy up, ``make_node()`` spun until Ctrl-C or an external
    shutdown (the test stopping it), then the node destroyed and rclpy shut down."""
    import rclpy
    from rclpy.executors import ExternalShutdownException

    rclpy.init()
    node = make_node()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def kinematic_dual_arm(tmp_path: Path, sim_clock: bool = False) -> Path:
    """``configs/ros_dual_arm.yaml`` with both arms kinematic (the same graph minus physics: fast
    on a loaded machine), written under ``tmp_path``; with ``sim_clock`` the robot node runs on
    simulated time (its watchdog counts driver ticks, not wall time)."""
    import yaml

    cfg = yaml.safe_load((ROOT / "configs/ros_dual_arm.yaml").read_text())
    for arm in cfg["robot"]["arms"]:
        arm["backend"] = "kinematic"
    if sim_clock:
        cfg["use_sim_time"], cfg["robot"]["sim_clock"] = True, True
    path = tmp_path / "dual.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Procs:
    """Start processes with logs in ``log_dir``; :meth:`stop_all` TERMs then KILLs them."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(
        self,
        name: str,
        args: list[str],
        stdin: int | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen:
        """``stdin=subprocess.PIPE``: the test types into the process (a keyboard device);
        ``env``: variables set on top of this process's (a robot's own ``ROS_DOMAIN_ID``)."""
        child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        log = open(self.log_dir / f"{name}.log", "ab")
        p = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            env=child_env,
            stdin=stdin,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs[name] = p
        return p

    def start_node(
        self,
        kind: str,
        config: Path,
        *overrides: str,
        stdin: int | None = None,
        name: str = "",
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen:
        """One ``rlinf_ros.nodes.<kind>`` process, named ``kind`` unless ``name`` says (a
        second robot's nodes)."""
        argv = ["-m", f"rlinf_ros.nodes.{kind}", "--config", str(config), *overrides]
        return self.start(name or kind, argv, stdin, env)

    def start_server(
        self, port: int, camera: str = "camera:224x224", name: str = "server"
    ) -> subprocess.Popen:
        return self.start(
            name,
            [
                str(ROOT / "tests/rlinf_ros/scripted_policy_server.py"),
                "--port",
                str(port),
                "--camera",
                camera,
            ],
        )

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        p = self.procs.pop(name)
        p.send_signal(sig)
        p.wait(timeout=10)

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def stop_all(self, timeout: float = 20.0) -> dict[str, int | None]:
        # 20 s, not less: on 2 loaded cores (the whole suite around it) a node's DDS teardown after
        # SIGTERM has taken more than 8 s; a node that ignores SIGTERM still fails the tests
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        codes = {}
        deadline = time.time() + timeout
        for name, p in self.procs.items():
            try:
                codes[name] = p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
                codes[name] = None
        self.procs.clear()
        return codes

    def logs(self) -> str:
        out = []
        for f in sorted(self.log_dir.glob("*.log")):
            out.append(f"==== {f.name}\n" + f.read_text(errors="replace")[-3000:])
        return "\n".join(out)


class Probe:
    """An in-process rclpy node on its own context, spun in a thread, recording messages."""

    def __init__(self, name: str = "probe") -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.node = rclpy.create_node(name, context=self.ctx)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def record(
        self, msg_type: Any, topic: str, convert: Callable[[Any], Any], qos: Any = 10
    ) -> list:
        """Subscribe; returns the list that collects ``(receive_time, convert(msg))``."""
        out: list = []

        def cb(msg: Any) -> None:
            with self.lock:
                out.append((time.time(), convert(msg)))

        self.node.create_subscription(msg_type, topic, cb, qos)
        return out

    def record_stamped(
        self, msg_type: Any, topic: str, convert: Callable[[Any], Any], qos: Any = 10
    ) -> list:
        """Subscribe; returns the list that collects ``(header stamp in s, convert(msg))``: the
        sender's clock (simulated time in a graph with ``use_sim_time``), not our receive time."""
        out: list = []

        def cb(msg: Any) -> None:
            with self.lock:
                out.append((msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9, convert(msg)))

        self.node.create_subscription(msg_type, topic, cb, qos)
        return out

    def record_clock(self) -> list:
        """``/clock`` values (s) as they arrive: the simulated time of the graph."""
        from rosgraph_msgs.msg import Clock

        return self.record(Clock, "/clock", lambda m: m.clock.sec + m.clock.nanosec * 1e-9)

    def wait_for_clock(
        self, clock: list, t: float, timeout: float, procs: Procs | None = None
    ) -> None:
        """Until the graph's simulated time (``record_clock``'s list) reaches ``t``."""
        self.wait_for(
            lambda: bool(clock) and clock[-1][1] >= t, timeout, f"/clock to reach {t:.2f} s", procs
        )

    def call_trigger(self, name: str, timeout: float = 30.0) -> tuple[bool, str]:
        """Call a ``std_srvs/Trigger`` service: ``(success, message)``; fails if it does not
        answer."""
        from std_srvs.srv import Trigger

        client = self.node.create_client(Trigger, name)
        assert client.wait_for_service(timeout_sec=timeout), f"service {name} not available"
        fut = client.call_async(Trigger.Request())
        deadline = time.time() + timeout
        while not fut.done() and time.time() < deadline:
            time.sleep(0.01)
        assert fut.done(), f"service {name} did not answer within {timeout} s"
        result = fut.result()
        assert result is not None, f"service {name} failed: {fut.exception()}"
        return result.success, result.message

    def wait_for(
        self, cond: Callable[[], bool], timeout: float, what: str, procs: Procs | None = None
    ) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if cond():
                    return
            time.sleep(0.05)
        raise AssertionError(
            f"timed out after {timeout} s waiting for {what}\n" + (procs.logs() if procs else "")
        )

    def close(self) -> None:
        import rclpy

        self._stop.set()
        self._thread.join(timeout=2)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)
