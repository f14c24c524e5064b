"""Shared process entry point of every node: args, ROS parameters, logging, rclpy init, signals.

Why our own signal handling: a node must stop its driver (hold the arm, close the camera)
before exiting on SIGINT / SIGTERM from ``rlinf ros up`` or a test; rclpy's default handler
would raise inside a callback instead. We disable it, set a flag, and leave the spin loop.
Teardown is bounded: if closing the driver, destroying the node or the interpreter's exit
(DDS participants, GL contexts) has not finished ``shutdown_grace_s`` (a graph setting) after the
signal, the node prints every thread's stack and exits 1 -- a launcher or a test sees a stopped node
and where it hung, not a process it has to SIGKILL blind. Once the node's own ``close`` has
finished, a middleware teardown (``destroy_node``, ``rclpy`` shutdown) still stuck a second before
the grace ends is logged with its stack and left behind: the stop is clean, the exit code 0.

Time: every node reads its node clock (:func:`now_s`, ``create_timer``) for what measures robot
time -- control periods, watchdogs, stamps, episode timeouts. That clock is wall time, or, with
``use_sim_time`` (the ROS parameter rclpy declares on every node; the graph setting
``use_sim_time: true`` passes it to each node as ``-p use_sim_time:=true``), the ``/clock`` that
the simulated robot node publishes (``robot.sim_clock``, :mod:`rlinf_ros.nodes.robot`). Waits on a
computation or the network (the policy server's answer, a reconnect) stay on wall time.

Why settings are ROS parameters as well as YAML: ``ros2 launch`` files, ``ros2 param get``
and ``--ros-args -p key:=value`` are how ROS users configure and inspect nodes. The YAML
section stays the source of defaults (``rlinf ros up`` and the launch files read the same
file); :func:`declare_config` declares each leaf of the node's config dataclass as a parameter
with the YAML value as default and rebuilds the dataclass from any override.
"""

from __future__ import annotations

import argparse
import array
import dataclasses
import difflib
import faulthandler
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from rlinf_contracts.config import ConfigError, from_dict, to_dict
from rlinf_ros.config import RosGraphConfig, load_graph_config
from rlinf_ros.secrets import is_secret

log = logging.getLogger(__name__)

C = TypeVar("C")
QOS_SENSOR_DEPTH = 5
# set by the node's name / namespace (``-r __node:=`` / ``-r __ns:=``), not by parameters
NOT_PARAMETERS = ("name", "namespace")


def now_s(node: Any) -> float:
    """The node's clock in float seconds: wall time, or simulated time under ``use_sim_time``."""
    return node.get_clock().now().nanoseconds * 1e-9


def sensor_qos():
    """Best-effort subscriber QoS: matches both reliable and best-effort sensor publishers."""
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=QOS_SENSOR_DEPTH,
        reliability=ReliabilityPolicy.BEST_EFFORT,
        history=HistoryPolicy.KEEP_LAST,
    )


def reliable_qos(depth: int = 5):
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=depth, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST
    )


# ---- ROS parameters from a config dataclass ---------------------------------------------------
LeafPath = (
    tuple  # of str (field / mapping key) and int (list index): where a leaf sits in to_dict(cfg)
)


def _param_value(value: Any) -> Any:
    """A leaf as a ROS parameter value: arrays are homogeneous, so ints beside floats become
    floats."""
    if isinstance(value, (list, tuple)):
        items = list(value)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)
        return (
            [float(v) for v in items]
            if numbers and any(isinstance(v, float) for v in items)
            else items
        )
    return value


def _ros_default(value: Any) -> Any:
    """None for what has no ROS parameter type (None, empty list / mapping): declared untyped."""
    return None if isinstance(value, (list, tuple, dict)) and not value else value


def _representable(value: Any) -> bool:
    """Whether ROS has a parameter type for ``value``: a scalar or a flat homogeneous array."""
    scalar = (bool, int, float, str)
    if value is None or isinstance(value, scalar):
        return True
    if isinstance(value, list):
        return any(
            all(isinstance(v, t) and (t is bool or not isinstance(v, bool)) for v in value)
            for t in scalar
        )
    return False


def _leaves(
    value: Any, name: str, path: LeafPath, help_text: str, out: dict[str, tuple[LeafPath, Any, str]]
) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _leaves(
                getattr(value, f.name),
                f"{name}.{f.name}" if name else f.name,
                (*path, f.name),
                f.metadata.get("help", ""),
                out,
            )
    elif isinstance(value, dict) and value:
        for k, v in value.items():
            _leaves(v, f"{name}.{k}", (*path, k), help_text, out)
    elif (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, dict) or dataclasses.is_dataclass(v) for v in value)
    ):
        for i, v in enumerate(value):  # `-p` names may not have a part that starts with a digit
            _leaves(v, f"{name}_{i}", (*path, i), help_text, out)
    # readable by anyone on the domain as a parameter: read from file / env only
    elif is_secret(name):
        log.debug("config field %s is a secret; never a ROS parameter", name)
    elif _representable(_ros_default(_param_value(value))):
        out[name] = (path, _param_value(value), help_text)
    else:  # e.g. a list of lists: stays YAML-only
        log.debug("config field %s has no ROS parameter type; not declared", name)


def config_leaves(
    cfg: Any, skip: tuple[str, ...] = NOT_PARAMETERS
) -> dict[str, tuple[LeafPath, Any, str]]:
    """``{parameter name: (path in to_dict(cfg), value, help)}`` for every leaf field of ``cfg``."""
    out: dict[str, tuple[LeafPath, Any, str]] = {}
    for f in dataclasses.fields(cfg):
        if f.name not in skip:
            _leaves(getattr(cfg, f.name), f.name, (f.name,), f.metadata.get("help", ""), out)
    return out


def config_parameters(cfg: Any, skip: tuple[str, ...] = NOT_PARAMETERS) -> dict[str, Any]:
    """Every leaf field of a node config as ``{ROS parameter name: value}``.

    Nested dataclasses and mappings give dotted names (``camera.fps``, ``cameras.wrist``); item
    ``i`` of a list of dataclasses is ``<field>_<i>`` (``arms_0.backend``). ``None`` and empty
    lists have no ROS type and are left out (a launch file cannot pass them either); values ROS
    cannot hold at all (a list of lists) are not parameters, only YAML.

    >>> from rlinf_ros.config import CameraNodeConfig
    >>> params = config_parameters(CameraNodeConfig())
    >>> params["camera.fps"], params["encoding"], "name" in params
    (30.0, 'rgb8', False)
    """
    return {
        name: value
        for name, (_, value, _) in config_leaves(cfg, skip).items()
        if _ros_default(value) is not None
    }


def _set_path(data: Any, path: LeafPath, value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _plain(value: Any) -> Any:
    """rclpy returns arrays as ``array.array`` or tuples; compare and store them as lists."""
    return [_plain(v) for v in value] if isinstance(value, (list, tuple, array.array)) else value


def declare_config(node: Any, cfg: C, skip: tuple[str, ...] = NOT_PARAMETERS) -> C:
    """Declare every leaf of ``cfg`` but secrets (:func:`rlinf_ros.secrets.is_secret`: never
    parameters, see :mod:`rlinf_ros.secrets`) as a read-only ROS parameter (YAML value as default)
    and return ``cfg`` rebuilt with the overrides (``--ros-args -p k:=v``, a launch file's
    parameters).

    Why two passes: ``-p camera.fps:=5`` parses as an integer, which ROS would refuse for a
    float parameter; we read overrides loosely, convert them with the typed walker (which names
    the parameter when it cannot), then declare the typed values, so ``ros2 param get`` shows
    what the node really uses. Why read-only: values are read once, at start; a later
    ``ros2 param set`` is refused instead of accepted and silently ignored. An override that
    names no parameter is an error (with the nearest name): ROS alone would ignore the typo.
    """
    from rcl_interfaces.msg import ParameterDescriptor

    data = to_dict(cfg)
    loose = ParameterDescriptor(dynamic_typing=True)
    for name, (path, default, _) in config_leaves(cfg, skip).items():
        default = _ros_default(default)
        got = _plain(node.declare_parameter(name, default, loose).value)
        node.undeclare_parameter(name)
        if got is None or got == default:
            continue
        _set_path(data, path, got)
        try:
            from_dict(type(cfg), data)
        except ConfigError as e:
            raise ConfigError(
                f"ROS parameter '{name}' := {got!r} of node {node.get_name()!r}: {e}"
            ) from None
        log.info("%s: parameter %s := %r (YAML: %r)", node.get_name(), name, got, default)
    out = from_dict(type(cfg), data)
    for name, (_, value, help_text) in config_leaves(out, skip).items():
        value = _ros_default(value)
        desc = ParameterDescriptor(
            description=help_text, read_only=True, dynamic_typing=value is None
        )
        node.declare_parameter(name, value, desc, ignore_override=True)
    _reject_unknown_overrides(node, skip)
    return out


def _reject_unknown_overrides(node: Any, skip: tuple[str, ...]) -> None:
    """A ``-p`` override for a parameter this node never declared is a typo; say which.

    Names under a skipped field (``robot_spec.*`` when the node skips ``robot_spec``) are
    ignored: a launch file passes the whole YAML section, and the node reads those from YAML.
    """
    overrides = getattr(node, "_parameter_overrides", {})  # rclpy keeps no public accessor
    secret = sorted(n for n in overrides if is_secret(n))
    if secret:
        raise ConfigError(
            f"node {node.get_name()!r}: {secret} would be secret ROS parameters, readable by "
            "anyone on the domain; name a file or an environment variable in the YAML "
            "instead (e.g. api_key_file / api_key_env)"
        )
    unknown = sorted(
        n
        for n in overrides
        if not node.has_parameter(n) and re.sub(r"_\d+$", "", n.split(".")[0]) not in skip
    )  # `arms_0.x` -> field `arms`
    if unknown:
        known = list(node.list_parameters([], 0).names)
        near = difflib.get_close_matches(unknown[0], known, n=1, cutoff=0.5)
        hint = f" Did you mean '{near[0]}'?" if near else ""
        raise ConfigError(
            f"node {node.get_name()!r} has no parameter(s) {unknown}.{hint} "
            f"(`ros2 param list` shows them; nested fields are dotted, e.g. 'camera.fps')"
        )


def split_ros_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(our args, ROS args)``: every ``--ros-args ... [--]`` block goes to rclpy, markers
    included.

    >>> split_ros_args(["--config", "g.yaml", "--ros-args", "-p", "fps:=5", "--", "x=1"])
    (['--config', 'g.yaml', 'x=1'], ['--ros-args', '-p', 'fps:=5', '--'])
    """
    ours: list[str] = []
    ros: list[str] = []
    inside = False
    for arg in argv:
        if arg == "--ros-args":
            inside = True
        if inside:
            ros.append(arg)
            inside = arg != "--"
        else:
            ours.append(arg)
    return ours, ros


def parse_args(kind: str, argv: list[str] | None = None) -> tuple[RosGraphConfig, str | None]:
    p = argparse.ArgumentParser(
        prog=f"python -m rlinf_ros.nodes.{kind}", description=f"rlinf {kind} node (ROS 2)"
    )
    p.add_argument("--config", required=True, help="graph YAML (configs/ros_*.yaml)")
    p.add_argument("--name", default=None, help="which node of that kind (cameras: by name)")
    p.add_argument("overrides", nargs="*", help="key=value config overrides")
    a = p.parse_args(split_ros_args(sys.argv[1:] if argv is None else argv)[0])
    return load_graph_config(a.config, a.overrides), a.name


def apply_ros_env(cfg: RosGraphConfig) -> None:
    """Domain id and RMW from the config (before rclpy.init), unless the config says inherit."""
    if cfg.domain_id is not None:
        os.environ["ROS_DOMAIN_ID"] = str(cfg.domain_id)
    os.environ.setdefault("RMW_IMPLEMENTATION", cfg.rmw)


def exit_process(code: int) -> NoReturn:
    """End a node's process after :func:`run_node` returned: non-daemon threads joined, ``atexit``
    handlers run, logs and stdio flushed, then ``os._exit`` -- no interpreter finalisation. The
    shutdown watchdog stays armed throughout (a thread that never ends still gives exit 1 + stacks).

    Why: by then the node has closed its driver, destroyed its ROS entities and shut rclpy down;
    what finalisation still does is free memory and run C library destructors (MuJoCo / GL
    contexts, DDS singletons, module teardown), with no Python frame and nothing to persist.
    Measured on 2 cores under load (load average 7-11): 4-6 s after "node stopped", the tail
    that ran past the shutdown watchdog and turned clean stops into exit 1.
    """
    import atexit

    try:
        for t in threading.enumerate():
            if t is not threading.current_thread() and not t.daemon:
                t.join()
        atexit._run_exitfuncs()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def graph_ros_args(cfg: RosGraphConfig) -> list[str]:
    """ROS arguments every node of the graph gets before its own (which may override them).

    >>> graph_ros_args(RosGraphConfig(use_sim_time=True))
    ['--ros-args', '-p', 'use_sim_time:=true', '--']
    >>> graph_ros_args(RosGraphConfig())
    []
    """
    return ["--ros-args", "-p", "use_sim_time:=true", "--"] if cfg.use_sim_time else []


def run_node(
    kind: str,
    build: Callable[[RosGraphConfig, str | None], object],
    argv: list[str] | None = None,
    shutdown_grace_s: float | None = None,
) -> int:
    """Parse args, start rclpy (with the ``--ros-args`` part), build the node, spin until
    SIGINT/SIGTERM, then close it (within ``shutdown_grace_s`` of the signal -- default: the
    graph's ``shutdown_grace_s`` -- or exit 1 with a stack dump of every thread)."""
    argv = sys.argv[1:] if argv is None else argv
    cfg, name = parse_args(kind, argv)
    grace = cfg.shutdown_grace_s if shutdown_grace_s is None else shutdown_grace_s
    logging.basicConfig(
        level=cfg.log_level.upper(),
        format=f"%(asctime)s {kind} %(levelname)s %(name)s: %(message)s",
    )
    apply_ros_env(cfg)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    stop = threading.Event()
    stopped_at = [time.monotonic()]  # when the stop began: the signal, else the end of the spin

    def on_signal(signum: int, _frame: object) -> None:
        if stop.is_set():
            return
        stopped_at[0] = time.monotonic()
        log.info(
            "%s: signal %d, shutting down (stack dump and exit 1 if not done in %.0f s)",
            kind,
            signum,
            grace,
        )
        # a C watchdog thread: it fires even while the interpreter is finalising or the GIL is held
        faulthandler.dump_traceback_later(grace, exit=True, file=sys.stderr)
        stop.set()

    rclpy.init(
        args=[f"rlinf_ros.nodes.{kind}", *graph_ros_args(cfg), *split_ros_args(argv)[1]],
        signal_handler_options=SignalHandlerOptions.NO,
    )
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        node = build(cfg, name)
    except Exception as e:
        log.error("%s node failed to start: %s: %s", kind, type(e).__name__, e)
        rclpy.try_shutdown()
        return 2
    executor = SingleThreadedExecutor()
    executor.add_node(node)  # type: ignore[arg-type]  # a Node subclass
    log.info("%s node up (ROS_DOMAIN_ID=%s)", kind, os.environ.get("ROS_DOMAIN_ID", "0"))
    try:
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    finally:
        if not stop.is_set():
            stopped_at[0] = time.monotonic()
        close = getattr(node, "close", None)
        if callable(close):
            close()

        def leave_graph() -> None:
            executor.remove_node(node)  # type: ignore[arg-type]  # as add_node
            node.destroy_node()  # type: ignore[attr-defined]  # a Node subclass
            rclpy.try_shutdown()

        left = _bounded(leave_graph, grace - (time.monotonic() - stopped_at[0]) - 1.0)
    if not left:
        log.warning(
            "%s: the ROS middleware's teardown (destroy_node / shutdown) was still running "
            "%.0f s after the stop; the node's own close had finished, exiting without it",
            kind,
            grace - 1.0,
        )
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    log.info("%s node stopped", kind)
    return 0


def _bounded(step: Callable[[], None], timeout_s: float) -> bool:
    """Run ``step`` in a daemon thread and wait at most ``timeout_s`` for it: True when it ended.

    Why: after a node's own ``close`` the rest is the middleware leaving the graph. Under load, with
    every node of a graph stopping at once, a DDS node teardown was seen to block past the grace
    period; the node's work (driver held, spool flushed, files closed) was done by then, so the stop
    is reported as the clean one it is, with the stuck stack in the log. A stuck call that holds
    the GIL keeps this wait from returning; the shutdown watchdog then ends the process (exit 1)."""
    done = threading.Event()

    def run() -> None:
        try:
            step()
        finally:
            done.set()

    threading.Thread(target=run, name="leave-graph", daemon=True).start()
    return done.wait(max(0.5, timeout_s))
