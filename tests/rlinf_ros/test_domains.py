"""Picking a ROS domain nobody on the host is in: a live DDS participant's domain is never drawn."""

from __future__ import annotations

import random
import socket

import pytest

from rlinf_ros.domains import domains_in_use, free_domains, rtps_port_block


def test_a_bound_port_in_a_domains_block_takes_that_domain_out_of_the_draw() -> None:
    low, high = 150, 155
    if domains_in_use() & set(range(low, high + 1)):
        pytest.skip(f"DDS participants on this host already use domains in {low}..{high}")
    target = 152
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", rtps_port_block(target).start + 13))
        assert target in domains_in_use()
        drawn = {free_domains(1, low, high, random.Random(i))[0] for i in range(60)}
        assert drawn == {150, 151, 153, 154, 155}
        pairs = {tuple(free_domains(2, low, high, random.Random(i))) for i in range(60)}
        assert pairs == {(150, 151), (153, 154), (154, 155)}
    assert target not in domains_in_use()


def test_no_free_run_is_an_error_that_says_so() -> None:
    free = sorted(set(range(160, 170)) - domains_in_use())
    d = free[0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", rtps_port_block(d).start + 7))
        with pytest.raises(RuntimeError, match="no 1 consecutive free ROS domain ids in"):
            free_domains(1, d, d)
    with pytest.raises(ValueError, match="count >= 1"):
        free_domains(0)


def test_a_live_rclpy_participant_marks_its_domain_in_use(ros_domain_id: int) -> None:
    rclpy = pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
    assert ros_domain_id not in domains_in_use()
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    try:
        node = rclpy.create_node("domain_probe", context=context)
        assert ros_domain_id in domains_in_use()
        assert ros_domain_id not in free_domains(1, ros_domain_id, ros_domain_id + 1)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
