"""Start-up: seconds from ``rlinf train`` to the end of the first training iteration.

Compares, on the embedded default (``configs/sim_franka_reach_ppo.yaml``, one fused process):

- ``in-process``: what ``rlinf train`` does for a one-process fused placement (no Ray);
- ``ray``: the same run forced through Ray (``cluster.resources`` set: a placement that asks for a
  custom resource must run on a Ray cluster), i.e. Ray start + worker spawn + the same work;
- ``ray.init alone``: a fresh Python that imports Ray and calls ``ray.init`` (embedded, no
  dashboard).

Each figure is the median of ``REPEATS`` fresh processes. The first-iteration moment is the
``learner.metrics: iteration 0`` debug line (``-v``, progress bar off), so the timing includes
interpreter start, imports, config checks, env and model construction and one iteration
(16 policy steps x 32 envs + 5 PPO epochs), but not the final checkpoint or exit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_results import machine_meta, write_table

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
REPEATS = int(os.environ.get("STARTUP_REPEATS", "3"))
CONFIG = "configs/sim_franka_reach_ppo.yaml"
BASE = [
    "train.iterations=1",
    "train.final_eval=false",
    "train.progress=false",
    "train.tensorboard=false",
]
MARKER = "learner.metrics: iteration 0"
RAY_INIT = (
    "import time; t = time.perf_counter(); import ray; "
    "ray.init(include_dashboard=False, configure_logging=False, log_to_driver=False); "
    "print(time.perf_counter() - t); ray.shutdown()"
)


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "RAY_AUTH_MODE": "disabled",
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa"),
        "PYOPENGL_PLATFORM": os.environ.get("PYOPENGL_PLATFORM", "osmesa"),
    }


def first_iteration_s(extra: list[str], out_dir: str) -> float:
    cmd = [
        PY,
        "-m",
        "rlinf_cli.main",
        "-v",
        "train",
        CONFIG,
        *BASE,
        f"train.out_dir={out_dir}",
        *extra,
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    seen = None
    assert proc.stderr is not None
    for line in proc.stderr:
        if seen is None and MARKER in line:
            seen = time.perf_counter() - t0
    if proc.wait() != 0 or seen is None:
        raise RuntimeError(
            f"{' '.join(cmd)} failed (rc {proc.returncode}) or never reached an iteration"
        )
    return seen


def ray_init_s() -> float:
    out = subprocess.run(
        [PY, "-c", RAY_INIT], cwd=ROOT, env=_env(), capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / "rlinf_startup_bench"
    shutil.rmtree(tmp, ignore_errors=True)  # fresh run dirs: rlinf train refuses a used out_dir
    cases = {
        "in-process (rlinf train default)": lambda i: first_iteration_s(
            [], str(tmp / f"inproc{i}")
        ),
        "ray (same run through Ray)": lambda i: first_iteration_s(
            ["cluster.resources={bench: 1}"], str(tmp / f"ray{i}")
        ),
        "ray.init alone (import ray + init)": lambda i: ray_init_s(),
    }
    rows = []
    for name, fn in cases.items():
        times = [fn(i) for i in range(REPEATS)]
        rows.append(
            {
                "case": name,
                "median_s": round(statistics.median(times), 2),
                "min_s": round(min(times), 2),
                "max_s": round(max(times), 2),
                "runs": REPEATS,
            }
        )
        print(
            f"{name:40s} median {statistics.median(times):6.2f} s  (min {min(times):.2f}, max "
            f"{max(times):.2f})"
        )
    load = round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None
    write_table(
        "startup",
        "Start-up: rlinf train -> end of the first iteration",
        [
            f"`{CONFIG}`, one fused process, {REPEATS} fresh processes per case (median). "
            "In-process skips Ray; `ray.init alone` is the floor any Ray-based start pays before "
            "spawning a worker. Target: <= 5 s in-process.",
            f"Load average at the end: {load}. The machine (2 cores) is shared, so compare rows, "
            "not absolute numbers.",
        ],
        machine_meta(load_avg=load),
        rows,
        [
            ("case", lambda r: r["case"]),
            ("median s", lambda r: r["median_s"]),
            ("min s", lambda r: r["min_s"]),
            ("max s", lambda r: r["max_s"]),
        ],
    )


if __name__ == "__main__":
    main()
