"""Build a ROS 2 ``LaunchDescription`` from a graph YAML (used by ``launch/*.launch.py``).

Why the launch files are thin: ``rlinf ros up`` and ``ros2 launch`` must start the *same*
processes from the *same* YAML, so both take their command lines from
:func:`rlinf_ros.graph.node_commands`. ``launch`` / ``launch_ros`` are imported only here and
only when a launch file runs; machines without them use ``rlinf ros up``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlinf_ros.config import load_graph_config
from rlinf_ros.graph import graph_env, node_commands

REPO = Path(__file__).resolve().parents[1]


def _require_launch() -> Any:
    try:
        import launch
        import launch.actions
        import launch.substitutions
    except ImportError as e:
        raise RuntimeError("ROS 2 launch is not installed here; start the same graph with "
                           "`rlinf ros up <config>` (reads the same YAML)") from e
    return launch


def graph_launch_description(default_config: str) -> Any:
    """LaunchDescription with a ``config`` argument (YAML path) and one process per node."""
    launch = _require_launch()
    from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

    def make_nodes(context: Any) -> list:
        path = LaunchConfiguration("config").perform(context)
        if not Path(path).is_absolute():
            path = str(REPO / path)
        cfg = load_graph_config(path)
        env = graph_env(cfg)
        return [ExecuteProcess(cmd=n.argv, name=n.name, output="screen", additional_env=env,
                               sigterm_timeout="10") for n in node_commands(cfg, path)]

    return launch.LaunchDescription([
        DeclareLaunchArgument("config", default_value=default_config, description="graph YAML"),
        OpaqueFunction(function=make_nodes),
    ])
