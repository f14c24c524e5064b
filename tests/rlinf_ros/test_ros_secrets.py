"""Secrets of the node graph never become ROS parameters or argv.

Over real DDS: the policy client node started the way ``rlinf ros up`` starts it (``graph.py``),
its API key from an environment variable the YAML names; its ``get_parameters`` /
``list_parameters`` services and ``/proc/<pid>/cmdline`` hold no trace of the key, and it still
authenticates to a policy server that requires it. Without DDS: the config errors that name the
key, and what the launch files would pass as parameters.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")

from ros_procs import Probe

from rlinf_contracts.config import ConfigError
from rlinf_ros.config import PolicyClientConfig, load_graph_config
from rlinf_ros.graph import Graph, graph_env, node_commands
from rlinf_ros.nodes.common import config_parameters
from rlinf_ros.online_config import StreamerNodeConfig
from rlinf_ros.secrets import is_secret

KEY = "policy-key-7f3a9c1e-never-a-parameter"
TOKEN = "ingest-token-5b2d8e-never-a-parameter"


def _write(tmp_path: Path, cfg: dict, name: str = "graph.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_literal_api_key_in_the_config_is_refused_naming_the_key_and_the_alternatives(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, {"policy_client": {"enabled": True, "api_key": KEY}})
    with pytest.raises(
        ConfigError, match=r"policy_client\.api_key'.*policy_client\.api_key_file.*api_key_env"
    ) as e:
        load_graph_config(path)
    assert KEY not in str(e.value)


@pytest.mark.parametrize(
    "override",
    [
        f"policy_client.api_key={KEY}",
        f"streamer.stream.token={TOKEN}",
        f"+policy_client.password={KEY}",
    ],
)
def test_a_secret_override_is_refused_before_it_reaches_any_argv(
    tmp_path: Path, override: str
) -> None:
    path = _write(tmp_path, {"policy_client": {"enabled": True}})
    key = override.split("=", 1)[0].lstrip("+")
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as e:
        load_graph_config(path, [override])
    assert KEY not in str(e.value) and TOKEN not in str(e.value)
    with pytest.raises(ConfigError, match="command line"):
        node_commands(load_graph_config(path), path, [override])


def test_launch_parameters_hold_no_secret_and_keys_resolve_from_file_or_env(
    tmp_path: Path, monkeypatch
) -> None:
    # what launch/*.launch.py passes as ROS parameters: every leaf of the section but its secrets
    streamer = StreamerNodeConfig(enabled=True)
    streamer.stream.token = (
        TOKEN  # a literal token in the YAML is read by the node, never a parameter
    )
    for section in (PolicyClientConfig(), streamer):
        params = config_parameters(section)
        assert not [n for n in params if is_secret(n)], sorted(params)
        assert TOKEN not in json.dumps(params, default=str)
    assert {"api_key_file", "api_key_env"} <= set(config_parameters(PolicyClientConfig()))

    key_file = tmp_path / "api_key"
    key_file.write_text(KEY + "\n")
    for var in (
        "RLINF_API_KEY",
        "RLINF_API_KEY_FILE",
        "MY_KEY",
        "MY_KEY_FILE",
        "RLINF_INGEST_TOKEN",
        "RLINF_INGEST_TOKEN_FILE",
    ):
        monkeypatch.delenv(var, raising=False)
    assert PolicyClientConfig().resolved_api_key() is None
    assert PolicyClientConfig(api_key_file=str(key_file)).resolved_api_key() == KEY
    monkeypatch.setenv("MY_KEY", KEY)
    assert PolicyClientConfig(api_key_env="MY_KEY").resolved_api_key() == KEY
    monkeypatch.setenv("RLINF_API_KEY_FILE", str(key_file))
    assert PolicyClientConfig().resolved_api_key() == KEY
    with pytest.raises(ConfigError, match="policy_client.api_key_file.*cannot read"):
        PolicyClientConfig(api_key_file=str(tmp_path / "missing")).resolved_api_key()

    with pytest.raises(ConfigError, match=r"streamer\.token_file.*RLINF_INGEST_TOKEN"):
        StreamerNodeConfig(enabled=True).resolved_stream()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    assert (
        StreamerNodeConfig(enabled=True, token_file=str(token_file)).resolved_stream().token
        == TOKEN
    )


def _parameters(probe: Probe, node: str, timeout: float = 60.0) -> dict[str, object]:
    """Every parameter of ``node`` as the ROS graph serves it (``ros2 param dump``)."""
    from rcl_interfaces.srv import GetParameters, ListParameters

    def call(srv_type, name: str, request):
        client = probe.node.create_client(srv_type, f"/{node}/{name}")
        assert client.wait_for_service(timeout_sec=timeout), (
            f"/{node}/{name} not offered within {timeout} s"
        )
        future = client.call_async(request)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert future.done(), f"/{node}/{name} did not answer within {timeout} s"
        return future.result()

    names = list(call(ListParameters, "list_parameters", ListParameters.Request()).result.names)
    values = call(GetParameters, "get_parameters", GetParameters.Request(names=names)).values
    return {
        n: (v.string_value, v.string_array_value, v.integer_value, v.double_value)
        for n, v in zip(names, values)
    }


@pytest.mark.ros
@pytest.mark.parametrize("source", ["file", "env"])
def test_policy_client_key_is_no_parameter_nor_argv_and_still_authenticates(
    tmp_path: Path, ros_domain_id: int, monkeypatch, source: str
) -> None:
    from scripted_policy_server import SineJointPolicy, joint_delta_spec
    from std_msgs.msg import String

    from policy_server.background import ServerThread
    from policy_server.client import PolicyClient, PolicyServerUnavailable
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer

    for var in ("RLINF_API_KEY", "RLINF_API_KEY_FILE"):
        monkeypatch.delenv(var, raising=False)
    if source == "env":
        monkeypatch.setenv(
            "RLINF_TEST_POLICY_KEY", KEY
        )  # the graph hands its environment to every node
        key_source = {"api_key_env": "RLINF_TEST_POLICY_KEY"}
    else:
        (tmp_path / "api_key").write_text(KEY + "\n")
        key_source = {"api_key_file": str(tmp_path / "api_key")}
    server = PolicyServer(
        SineJointPolicy(joint_delta_spec({})),
        ServerConfig(host="127.0.0.1", port=0, max_wait_ms=0.0, api_key=KEY),
    )
    with ServerThread(server) as srv:
        # the server really requires the key
        with pytest.raises(PolicyServerUnavailable, match="401"):
            PolicyClient(srv.url, retries=0, connect_timeout_s=30.0)
        path = _write(
            tmp_path,
            {
                "robot": {"enabled": False},
                "policy_client": {
                    "enabled": True,
                    "server_url": srv.url,
                    "cameras": {},
                    "control_hz": 5,
                    **key_source,
                },
            },
        )
        cfg = load_graph_config(path)
        graph = Graph(node_commands(cfg, path, only=["policy_client"]))
        probe = Probe("secrets_probe")
        try:
            graph.start(graph_env(cfg))
            status = probe.record(String, "policy_client/status", lambda m: json.loads(m.data))
            probe.wait_for(
                lambda: any(s["connected"] for _, s in status) or graph.poll() is not None,
                120,
                "the policy client to connect with its key",
            )
            assert graph.poll() is None, "the policy client node exited"
            assert any(s["connected"] and not s["refused"] for _, s in status), status[-1:]

            params = _parameters(probe, "policy_client")
            assert (
                "server_url" in params and "control_hz" in params
            )  # the service answers with our params
            assert not [n for n in params if is_secret(n)], sorted(params)
            assert KEY not in repr(params)

            pid = graph.nodes[0].proc.pid
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert b"rlinf_ros.nodes.policy_client" in cmdline and KEY.encode() not in cmdline
        finally:
            probe.close()
            codes = graph.stop(timeout=30)
    assert codes == {"policy_client": 0}, codes


def test_a_secret_given_as_a_ros_parameter_stops_the_node(ros_domain_id: int) -> None:
    import rclpy
    from rclpy.parameter import Parameter

    from rlinf_ros.nodes.common import declare_config

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    # `--ros-args -p api_key:=...` or a launch file's parameters: refused, the value never echoed
    try:
        node = rclpy.create_node(
            "policy_client", context=ctx, parameter_overrides=[Parameter("api_key", value=KEY)]
        )
        with pytest.raises(ConfigError, match=r"\['api_key'\] would be secret ROS parameters") as e:
            declare_config(node, PolicyClientConfig(), skip=("name", "namespace", "robot_spec"))
        assert KEY not in str(e.value) and not node.has_parameter("api_key")
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
