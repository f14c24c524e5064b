"""Shared fixtures. Ray is started once per test session (idle Ray costs ~0.7 GB), not per test."""

from __future__ import annotations

import os
import random

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def ray_cluster():
    """The one local Ray instance of this test run, as a ``learner.cluster.Cluster`` (4 CPU slots)."""
    from learner.cluster import Cluster

    cluster = Cluster.local(num_cpus=4, resources={"robot:franka0": 1})
    yield cluster
    cluster.shutdown()


@pytest.fixture
def ros_domain_id(monkeypatch) -> int:
    """A random ROS_DOMAIN_ID per test: other processes on this machine may run ROS 2 too."""
    domain = random.randint(1, 101)
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    return domain
