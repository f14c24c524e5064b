"""Node settings are ROS parameters: flattened from the config dataclass, overridable with
``--ros-args -p key:=value``, typed, read-only after start, typos named."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the robot extra (ros-kilted-* wheels)")

from ros_procs import ROOT, Probe, Procs

from rlinf_contracts.config import ConfigError
from rlinf_ros.config import CameraNodeConfig, PolicyClientConfig, RobotNodeConfig
from rlinf_ros.nodes.common import config_parameters, declare_config, split_ros_args


def test_every_leaf_is_a_parameter_with_its_yaml_value() -> None:
    robot = config_parameters(RobotNodeConfig())
    assert robot["driver_hz"] == 100.0 and robot["topics.joint_states"] == "joint_states"
    assert robot["arms_0.backend"] == "sim" and isinstance(
        robot["arms_0.safety.watchdog_ms"], (int, float)
    )
    assert len(robot["arms_0.home"]) == 7 and all(
        isinstance(v, float) for v in robot["arms_0.home"]
    )
    assert "name" not in robot and "namespace" not in robot  # set by -r __node:= / __ns:=
    client = config_parameters(PolicyClientConfig())
    assert client["cameras.camera"] == "camera/camera/color/image_raw" and client[
        "joint_prefixes"
    ] == ["panda_"]


def test_ros_args_are_split_from_ours() -> None:
    assert split_ros_args(["--config", "a.yaml", "x=1"]) == (["--config", "a.yaml", "x=1"], [])
    ours, ros = split_ros_args(
        ["--config", "a.yaml", "--ros-args", "-p", "fps:=5", "-r", "__ns:=/a"]
    )
    assert ours == ["--config", "a.yaml"] and ros == [
        "--ros-args",
        "-p",
        "fps:=5",
        "-r",
        "__ns:=/a",
    ]


def _node_with(overrides: dict[str, object]):
    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node(
        "params_under_test",
        context=ctx,
        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
    )
    return ctx, node


def _declare(cfg: object, overrides: dict[str, object]) -> tuple[object, dict[str, object]]:
    """(rebuilt config, {name: (value, read_only)}) of a throwaway node with these overrides."""
    import rclpy

    ctx, node = _node_with(overrides)
    try:
        out = declare_config(node, cfg)
        names = list(config_parameters(cfg))
        values = node.get_parameters(names)
        descs = node.describe_parameters(names)
        return out, {n: (v.value, d.read_only) for n, v, d in zip(names, values, descs)}
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)


def test_overrides_rebuild_the_typed_config(ros_domain_id: int) -> None:
    cfg, params = _declare(
        CameraNodeConfig(), {"camera.fps": 5, "camera.width": 32, "encoding": "bgr8"}
    )
    assert cfg.camera.fps == 5.0 and isinstance(
        cfg.camera.fps, float
    )  # `-p camera.fps:=5` is an int
    assert cfg.camera.width == 32 and cfg.encoding == "bgr8" and cfg.camera.height == 224
    fps, read_only = params["camera.fps"]
    assert fps == 5.0 and isinstance(fps, float)  # `ros2 param get` shows the value the node uses
    assert all(
        ro for _, ro in params.values()
    )  # read at start: a later `ros2 param set` is refused
    robot, _ = _declare(
        RobotNodeConfig(), {"arms_0.backend": "kinematic", "arms_0.home": [0.0] * 7}
    )
    assert robot.arms[0].backend == "kinematic" and robot.arms[0].home == (0.0,) * 7
    client, params = _declare(
        PolicyClientConfig(cameras={}), {}
    )  # an empty mapping has no ROS type
    assert client.cameras == {} and params["joint_prefixes"] == (["panda_"], True)


def test_bad_overrides_name_the_parameter(ros_domain_id: int) -> None:
    with pytest.raises(ConfigError, match=r"ROS parameter 'camera.width' := 'wide'.*expects int"):
        _declare(CameraNodeConfig(), {"camera.width": "wide"})
    with pytest.raises(
        ConfigError, match=r"no parameter\(s\) \['camera.fsp'\]. Did you mean 'camera.fps'"
    ):
        _declare(CameraNodeConfig(), {"camera.fsp": 5.0})


@pytest.mark.ros
@pytest.mark.sim
def test_camera_node_takes_ros_args_parameters(tmp_path: Path, ros_domain_id: int) -> None:
    """A real camera process started with ``--ros-args -p``: the parameter service reports the
    override and the images follow it: their size, and one frame per 1/fps of the node's clock.

    The graph runs on simulated time and this test owns ``/clock``: it advances time in 50 ms
    steps and waits for each frame, so the rate is checked exactly however loaded the machine
    is (the camera's wall-clock rate is a benchmark figure, benchmarks/ros_rates.py)."""
    from rcl_interfaces.srv import GetParameters
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image

    path = tmp_path / "cam.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "robot": {"enabled": False},
                "use_sim_time": True,
                "cameras": [
                    {
                        "name": "cam",
                        "camera": {"backend": "sim", "width": 64, "height": 48, "fps": 20},
                        "mirror_joint_states": "",
                    }
                ],
            }
        )
    )
    procs, probe = Procs(tmp_path), Probe("param_probe")
    try:
        procs.start_node(
            "camera", path, "--ros-args", "-p", "camera.fps:=4", "-p", "camera.width:=40"
        )
        images = probe.record_stamped(Image, "camera/camera/color/image_raw", lambda m: m.width)
        clock = probe.node.create_publisher(Clock, "/clock", 10)
        client = probe.node.create_client(GetParameters, "/cam/get_parameters")
        probe.wait_for(
            lambda: client.service_is_ready(), 60, "the camera's parameter service", procs
        )
        future = client.call_async(
            GetParameters.Request(
                names=["camera.fps", "camera.width", "camera.height", "use_sim_time"]
            )
        )
        probe.wait_for(future.done, 10, "GetParameters answer", procs)
        fps, width, height, sim = future.result().values
        assert (fps.double_value, width.integer_value, height.integer_value, sim.bool_value) == (
            4.0,
            40,
            48,
            True,
        )
        probe.wait_for(
            lambda: clock.get_subscription_count() > 0, 30, "the camera on /clock", procs
        )

        def publish_clock(ns: int) -> None:
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = divmod(ns, 10**9)
            clock.publish(msg)

        def frame_at(ns: int) -> bool:
            publish_clock(ns)  # again while waiting: the node's /clock subscription is best-effort
            return bool(images) and abs(images[-1][0] - ns * 1e-9) < 1e-6

        for step in range(1, 41):  # 2 s of simulated time in 50 ms steps: a frame at each 250 ms
            ns = step * 50_000_000
            publish_clock(ns)
            if step % 5 == 0:
                at_ns = functools.partial(frame_at, ns)
                probe.wait_for(at_ns, 60, f"the frame at {ns * 1e-9:.2f} s", procs)
        stamps = [t for t, _ in images]
        # fps 4, not the YAML's 20
        assert stamps == pytest.approx([0.25 * k for k in range(1, 9)]), stamps
        assert all(w == 40 for _, w in images)
    finally:
        probe.close()
        procs.stop_all()


def test_docstring_examples_of_node_common_run() -> None:
    import doctest

    import rlinf_ros.nodes.common as common

    result = doctest.testmod(common)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["robot.sim_clock=true", "robot.arms=[{backend: libfranka}]"], "robot.sim_clock"),
        (["robot.sim_clock=true", "robot.scene.lockstep=true"], "robot.scene.lockstep"),
        (["use_sim_time=true", "robot.scene.lockstep=true"], "use_sim_time"),
        (["robot.real_time_factor=0"], "robot.real_time_factor"),
    ],
)
def test_simulated_time_settings_are_checked(overrides: list[str], key: str) -> None:
    """Only a simulated arm can own /clock, and lock-step (time per action) excludes it."""
    from rlinf_contracts.config import ConfigError
    from rlinf_ros.config import load_graph_config

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_graph_config(ROOT / "configs/ros_sim_franka.yaml", overrides)
    assert load_graph_config(
        ROOT / "configs/ros_sim_franka.yaml", ["use_sim_time=true", "robot.sim_clock=true"]
    )
