"""Build a ROS 2 ``LaunchDescription`` from a graph YAML (used by ``launch/*.launch.py``).

Why the launch files are thin: ``rlinf ros up`` and ``ros2 launch`` must start the *same*
processes from the *same* YAML, so both take their command lines from
:func:`rlinf_ros.graph.node_commands`. Here each becomes a ``launch_ros.actions.Node`` without a
package (our nodes are Python modules, not ament executables: ``executable`` is this
interpreter and ``arguments`` are ``-m rlinf_ros.nodes.<kind> --config X --name N``), with the
node's YAML section as ROS ``parameters``: ``ros2 launch`` users see and override settings the
ROS way, and the node declares exactly these names (:func:`rlinf_ros.nodes.common.declare_config`),
plus ``use_sim_time`` when the graph runs on simulated time (``use_sim_time: true``).

``launch`` / ``launch_ros`` are imported only when a launch file runs; machines without them
(the pip-wheel ROS here) use ``rlinf ros up``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlinf_ros.config import RosGraphConfig, load_graph_config
from rlinf_ros.graph import NodeProcess, graph_env, node_commands, node_config
from rlinf_ros.nodes.common import config_parameters

REPO = Path(__file__).resolve().parents[1]
NO_LAUNCH = (
    "ROS 2 launch / launch_ros is not installed here (`{missing}`); start the same graph with "
    "`rlinf ros up <config>` (reads the same YAML), or source a ROS 2 install (Humble/Jazzy/Kilted)"
)


def _require_launch() -> Any:
    """``launch`` with ``launch_ros``, or a RuntimeError that says what to use instead."""
    try:
        import launch.actions
        import launch.substitutions
        import launch_ros.actions  # noqa: F401 -- checked here so the error comes before any node

        import launch
    except ImportError as e:
        raise RuntimeError(NO_LAUNCH.format(missing=e.name or e)) from e
    return launch


def launch_env(cfg: RosGraphConfig) -> dict[str, str]:
    """What the graph adds to the environment (domain id, RMW, unbuffered output), not all of it."""
    return {k: v for k, v in graph_env(cfg).items() if os.environ.get(k) != v}


def node_action(cfg: RosGraphConfig, node: NodeProcess) -> Any:
    """One ``launch_ros.actions.Node`` for a node of the graph, its settings as ROS parameters."""
    from launch_ros.actions import Node

    section = node_config(cfg, node.name, node.kind)
    namespace = getattr(section, "namespace", "") or None
    params = {**config_parameters(section), **({"use_sim_time": True} if cfg.use_sim_time else {})}
    return Node(
        executable=node.argv[0],
        arguments=node.argv[1:],
        name=node.name,
        namespace=namespace,
        parameters=[params],
        output="screen",
        additional_env=launch_env(cfg),
        sigterm_timeout=str(int(cfg.shutdown_grace_s) + 2),
    )  # after the node's own watchdog


def graph_launch_description(default_config: str) -> Any:
    """LaunchDescription with a ``config`` argument (YAML path) and one Node action per node."""
    launch = _require_launch()
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

    def make_nodes(context: Any) -> list:
        path = LaunchConfiguration("config").perform(context)
        if not Path(path).is_absolute():
            path = str(REPO / path)
        cfg = load_graph_config(path)
        return [node_action(cfg, n) for n in node_commands(cfg, path)]

    return launch.LaunchDescription(
        [
            DeclareLaunchArgument("config", default_value=default_config, description="graph YAML"),
            OpaqueFunction(function=make_nodes),
        ]
    )
