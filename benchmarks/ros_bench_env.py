"""The setting every ROS 2 benchmark script starts from: the repository and the ROS test rigs
(``tests/rlinf_ros``: ``ros_procs``, ``online_rig``) on ``sys.path``, offscreen MuJoCo rendering,
local Ray without auth.

Why one module: each script under ``benchmarks/`` that drives real ROS processes needs the same
few lines before its imports; one copy keeps them from drifting apart. A script imports it first
(``benchmarks/`` is the script's own directory, so it is importable as is)::

    from ros_bench_env import prepare

    ROOT = prepare()
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def prepare(fastrtps: bool = False) -> Path:
    """Put the repository, ``benchmarks/`` and the ROS test rigs on ``sys.path`` and set the
    rendering / Ray defaults; ``fastrtps``: also pin the middleware to Fast DDS (the timing
    benchmarks compare runs of one middleware). Returns the repository root."""
    for path in (ROOT, ROOT / "benchmarks", ROOT / "tests" / "rlinf_ros"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if fastrtps:
        os.environ["RMW_IMPLEMENTATION"] = "rmw_fastrtps_cpp"
    return ROOT
