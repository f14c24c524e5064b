"""Launch files: one ``launch_ros.actions.Node`` per graph node, its YAML section as ROS
parameters; a clear error where ROS 2 launch is absent.

``launch`` / ``launch_ros`` are not pip wheels here, so a tiny stand-in that records its
arguments is injected into ``sys.modules``; what is checked is what we hand to launch_ros.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the robot extra (ros-kilted-* wheels)")

from ros_procs import ROOT

from rlinf_ros.config import load_graph_config
from rlinf_ros.graph import node_config
from rlinf_ros.nodes.common import config_parameters, declare_config

LAUNCH_FILES = sorted(
    p.name.removesuffix(".launch.py") for p in (ROOT / "launch").glob("*.launch.py")
)


class _Recorded:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs


def _fake_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Just enough of ``launch`` / ``launch_ros`` to build a description and record the actions."""

    class LaunchDescription:
        def __init__(self, entities: list) -> None:
            self.entities = list(entities)

    class LaunchConfiguration:
        def __init__(self, name: str) -> None:
            self.name = name

        def perform(self, context: dict[str, str]) -> str:
            return context[self.name]

    mods = {
        name: types.ModuleType(name)
        for name in (
            "launch",
            "launch.actions",
            "launch.substitutions",
            "launch_ros",
            "launch_ros.actions",
        )
    }
    mods["launch"].LaunchDescription = LaunchDescription
    mods["launch.actions"].DeclareLaunchArgument = type("DeclareLaunchArgument", (_Recorded,), {})
    mods["launch.actions"].OpaqueFunction = type("OpaqueFunction", (_Recorded,), {})
    mods["launch.substitutions"].LaunchConfiguration = LaunchConfiguration
    mods["launch_ros.actions"].Node = type("Node", (_Recorded,), {})
    mods["launch"].actions, mods["launch"].substitutions = (
        mods["launch.actions"],
        mods["launch.substitutions"],
    )
    mods["launch_ros"].actions = mods["launch_ros.actions"]
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)


def _load(launch_file: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        launch_file, ROOT / f"launch/{launch_file}.launch.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _nodes(launch_file: str, config: str | None = None) -> tuple[str, list[_Recorded]]:
    """(config path used, Node actions) of a launch file run against the fake launch."""
    arg, opaque = _load(launch_file).generate_launch_description().entities
    path = config or str(ROOT / arg.kwargs["default_value"])
    return path, opaque.kwargs["function"]({"config": path})


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_without_ros2_launch_the_files_load_and_point_to_rlinf_ros_up(
    launch_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "launch_ros", None)  # `import launch_ros` raises ImportError
    monkeypatch.setitem(sys.modules, "launch_ros.actions", None)
    with pytest.raises(RuntimeError, match="rlinf ros up"):
        _load(launch_file).generate_launch_description()


@pytest.mark.parametrize("launch_file", LAUNCH_FILES)
def test_shipped_launch_files_start_one_node_action_per_node(
    launch_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_launch(monkeypatch)
    path, nodes = _nodes(launch_file)
    cfg = load_graph_config(path)
    assert [n.kwargs["name"] for n in nodes] == list(cfg.node_names())
    for node, (name, kind) in zip(nodes, cfg.node_names().items()):
        assert node.kwargs["executable"] == sys.executable and "package" not in node.kwargs
        assert node.kwargs["arguments"] == [
            "-m",
            f"rlinf_ros.nodes.{kind}",
            "--config",
            path,
            "--name",
            name,
        ]
        assert node.kwargs["parameters"] == [config_parameters(node_config(cfg, name, kind))]


def test_node_actions_carry_the_yaml_section_as_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = {
        "domain_id": 42,
        "robot": {
            "namespace": "left",
            "driver_hz": 200,
            "arms": [{"name": "panda", "backend": "kinematic", "home": [0, 0, 0, -2, 0, 2, 0.7]}],
        },
        "cameras": [
            {"name": "wrist", "camera": {"backend": "sim", "fps": 5, "width": 64, "height": 48}}
        ],
        "policy_client": {"control_hz": 15, "cameras": {"wrist": "camera/camera/color/image_raw"}},
    }
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(graph))
    _fake_launch(monkeypatch)
    _, nodes = _nodes("sim_robot", str(path))
    by_name = {n.kwargs["name"]: n.kwargs for n in nodes}
    assert list(by_name) == ["robot", "wrist", "policy_client"]
    robot, camera, client = (by_name[k]["parameters"][0] for k in by_name)
    assert robot["driver_hz"] == 200.0 and robot["arms_0.backend"] == "kinematic"
    assert robot["arms_0.home"] == [
        0.0,
        0.0,
        0.0,
        -2.0,
        0.0,
        2.0,
        0.7,
    ]  # a homogeneous double array
    assert by_name["robot"]["namespace"] == "left" and by_name["wrist"]["namespace"] is None
    assert camera["camera.fps"] == 5.0 and camera["camera.width"] == 64
    assert (
        client["control_hz"] == 15.0 and client["cameras.wrist"] == "camera/camera/color/image_raw"
    )
    assert all(
        k["additional_env"]["ROS_DOMAIN_ID"] == "42" and k["output"] == "screen"
        for k in by_name.values()
    )


def test_launch_parameters_are_exactly_what_the_nodes_declare(
    tmp_path: Path, ros_domain_id: int
) -> None:
    """Every parameter a launch file passes is accepted by :func:`declare_config` (no unknown
    name) and rebuilds the same section: launch and YAML cannot disagree."""
    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    cfg = load_graph_config(None, ["robot.arms=[{backend: kinematic}]", "cameras=[{name: cam}]"])
    for name, kind in {**cfg.node_names(), "policy_client": "policy_client"}.items():
        section = node_config(cfg, name, kind)
        ctx = rclpy.Context()
        rclpy.init(context=ctx)
        try:
            node = Node(
                f"launch_{kind}",
                context=ctx,
                parameter_overrides=[
                    Parameter(k, value=v) for k, v in config_parameters(section).items()
                ],
            )
            assert declare_config(node, section) == section, kind
            node.destroy_node()
        finally:
            rclpy.try_shutdown(context=ctx)
