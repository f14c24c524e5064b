"""Shared fixtures. Ray is started once per test session (idle Ray costs ~0.7 GB), not per test."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _uses_session_ray(item: pytest.Item) -> bool:
    return (
        "ray_cluster" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("ray") is not None
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules that use the session's Ray run last, in their collected order.

    Why: once started, the embedded Ray (raylet, GCS, idle workers) stays up until the session
    ends and takes CPU from whatever runs after it; ROS process graphs and streaming tests on a
    2-core machine should not share the cores with it. Whole modules move, so module-scoped
    fixtures are still built once.
    """
    ray_modules = {
        item.module.__name__
        for item in items  # type: ignore[attr-defined]  # pytest Items of modules have .module
        if getattr(item, "module", None) is not None and _uses_session_ray(item)
    }
    items.sort(
        key=lambda item: getattr(getattr(item, "module", None), "__name__", "") in ray_modules
    )


@pytest.fixture(scope="session")
def ray_cluster():
    """The one local Ray instance of this test run, as a ``learner.cluster.Cluster`` (4 CPU
    slots)."""
    from learner.cluster import Cluster

    cluster = Cluster.local(num_cpus=4, resources={"robot:franka0": 1})
    yield cluster
    cluster.shutdown()


@pytest.fixture
def ros_domain_id(monkeypatch) -> int:
    """A ROS_DOMAIN_ID per test, drawn at random among those no DDS participant on the host
    uses: another test run, a benchmark or a twin started beside this one must not hear this
    test's graph (two ``/clock`` publishers, two goals) nor be heard by it."""
    from rlinf_ros.domains import free_domains

    domain = free_domains()[0]
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    return domain
