"""Shared process entry point of every node: args, logging, rclpy init, clean signal handling.

Why our own signal handling: a node must stop its driver (hold the arm, close the camera)
before exiting on SIGINT / SIGTERM from ``rlinf ros up`` or a test; rclpy's default handler
would raise inside a callback instead. We disable it, set a flag, and leave the spin loop.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from typing import Callable

from rlinf_ros.config import RosGraphConfig, load_graph_config

log = logging.getLogger(__name__)

QOS_SENSOR_DEPTH = 5


def sensor_qos():  # type: ignore[no-untyped-def]
    """Best-effort subscriber QoS: matches both reliable and best-effort sensor publishers."""
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=QOS_SENSOR_DEPTH, reliability=ReliabilityPolicy.BEST_EFFORT,
                      history=HistoryPolicy.KEEP_LAST)


def reliable_qos(depth: int = 5):  # type: ignore[no-untyped-def]
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


def parse_args(kind: str, argv: list[str] | None = None) -> tuple[RosGraphConfig, str | None]:
    p = argparse.ArgumentParser(prog=f"python -m rlinf_ros.nodes.{kind}",
                                description=f"rlinf {kind} node (ROS 2)")
    p.add_argument("--config", required=True, help="graph YAML (configs/ros_*.yaml)")
    p.add_argument("--name", default=None, help="which node of that kind (cameras: by name)")
    p.add_argument("overrides", nargs="*", help="key=value config overrides")
    a = p.parse_args(argv)
    return load_graph_config(a.config, a.overrides), a.name


def apply_ros_env(cfg: RosGraphConfig) -> None:
    """Domain id and RMW from the config (before rclpy.init), unless the config says inherit."""
    if cfg.domain_id is not None:
        os.environ["ROS_DOMAIN_ID"] = str(cfg.domain_id)
    os.environ.setdefault("RMW_IMPLEMENTATION", cfg.rmw)


def run_node(kind: str, build: Callable[[RosGraphConfig, str | None], object], argv: list[str] | None = None) -> int:
    """Parse args, start rclpy, build the node, spin until SIGINT/SIGTERM, then close it."""
    cfg, name = parse_args(kind, argv)
    logging.basicConfig(level=cfg.log_level.upper(), format=f"%(asctime)s {kind} %(levelname)s %(name)s: %(message)s")
    apply_ros_env(cfg)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("%s: signal %d, shutting down", kind, signum)
        stop.set()

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        node = build(cfg, name)
    except Exception as e:  # noqa: BLE001 -- a node that cannot start says why, once, and exits 2
        log.error("%s node failed to start: %s: %s", kind, type(e).__name__, e)
        rclpy.try_shutdown()
        return 2
    executor = SingleThreadedExecutor()
    executor.add_node(node)  # type: ignore[arg-type]
    log.info("%s node up (ROS_DOMAIN_ID=%s)", kind, os.environ.get("ROS_DOMAIN_ID", "0"))
    try:
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    finally:
        close = getattr(node, "close", None)
        if callable(close):
            close()
        executor.remove_node(node)  # type: ignore[arg-type]
        node.destroy_node()  # type: ignore[attr-defined]
        rclpy.try_shutdown()
    log.info("%s node stopped", kind)
    return 0
