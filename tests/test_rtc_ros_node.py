"""The ROS 2 policy client node runs real-time chunking from its config (``policy_client.rtc``)
and from ROS parameters (``-p rtc.execute_horizon:=N``); a bad value names the parameter."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the robot extra (ros-kilted-* wheels)")

from rlinf_contracts.config import ConfigError
from rlinf_ros.config import PolicyClientConfig
from rlinf_ros.rtc import RtcConfig


class _ZeroPolicy:
    def infer(self, obs: dict) -> dict:
        return {"actions": np.zeros((4, 8))}

    def close(self) -> None:
        pass


def _node(args: list[str]):
    import rclpy

    from rlinf_ros.nodes.policy_client import PolicyClientNode

    rclpy.init(args=["--ros-args", *args])
    cfg = PolicyClientConfig(
        cameras={}, control_hz=10.0, rtc=RtcConfig(enabled=True, execute_horizon=6, blend="exp")
    )
    return PolicyClientNode(cfg, connect=_ZeroPolicy)


@pytest.mark.ros
def test_policy_client_node_accepts_the_rtc_config(ros_domain_id: int) -> None:
    import rclpy

    try:
        node = _node(["-p", "rtc.execute_horizon:=3"])
        try:
            rtc = node.loop.rtc
            assert rtc is not None and rtc.enabled and rtc.blend == "exp"  # from the config
            assert rtc.execute_horizon == 3  # from the ROS parameter
            assert node.get_parameter("rtc.execute_horizon").value == 3
            assert node.get_parameter("rtc.send_prefix").value is True
        finally:
            getattr(node, "close", lambda: None)()
            node.destroy_node()
        rclpy.try_shutdown()
        with pytest.raises(ConfigError, match=r"rtc.blend.*cubic"):
            _node(["-p", "rtc.blend:=cubic"])
    finally:
        rclpy.try_shutdown()
