"""ManiSkill3 on ``physx_cpu`` via the bridge: env steps/s, overhead vs raw ManiSkill, build cost.

For each obs mode we build ``make_env("maniskill/<task>", num_envs=B, sim_backend="physx_cpu")``
(a ``LoopVectorEnv`` over B one-env ManiSkill objects) and time ``env.step`` with random
actions, alternating 10-step segments with the raw ManiSkill ``gym`` envs inside the bridge
stepped directly with the same (already scaled) actions — the simulator work an env step must do
anyway. The overhead ratio is ``raw CPU time / bridge CPU time`` (process CPU time, robust to
other jobs on a shared machine); wall-clock rates are reported too. Build cost: wall seconds for
the B envs of each row (the first camera env of a process and image size includes lavapipe
shader compilation).

    .venv/bin/python benchmarks/maniskill_cpu.py            # state + rgb rows, B=4, ~1-2 min
    .venv/bin/python benchmarks/maniskill_cpu.py --quick    # state row only

Writes ``benchmarks/results/maniskill_cpu.json`` and ``.md``. Needs
``scripts/install_maniskill.sh``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from bench_results import RESULTS, machine_meta, write_table

from rlinf_contracts.env_registry import make_env
from sim_bridges.maniskill_bridge import scale_actions


class Clock:
    """Wall and process-CPU seconds of a block."""

    def __enter__(self) -> Clock:
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.w, time.process_time() - self.c


def measure(task: str, obs_mode: str, num_envs: int, image_size: int, steps: int) -> dict:
    with Clock() as build:
        env = make_env(
            f"maniskill/{task}",
            num_envs=num_envs,
            obs_mode=obs_mode,
            image_size=image_size,
            sim_backend="physx_cpu",
            max_episode_steps=10**6,
        )
    natives = [a.env for a in env.adapters]
    low, high = env.adapters[0].low, env.adapters[0].high
    rng = np.random.default_rng(0)
    b, a = env.num_envs, env.spec.action_dim
    env.reset(seed=0)
    for act in rng.uniform(-1, 1, size=(3, b, a)).astype(np.float32):  # warm-up
        env.step(act)
    seg = 10
    steps = max(seg, steps // seg * seg)
    actions = rng.uniform(-1, 1, size=(steps, b, a)).astype(np.float32)
    bridge_t, raw_t = (
        np.zeros((2, steps // seg)),
        np.zeros((2, steps // seg)),
    )  # [wall, cpu] per segment
    for r in range(steps // seg):
        chunk = actions[r * seg : (r + 1) * seg]
        with Clock() as c:
            for act in chunk:
                env.step(act)
        bridge_t[:, r] = c.wall, c.cpu
        with Clock() as c:
            for act in chunk:
                for i, native in enumerate(natives):
                    native.step(scale_actions(act[i], low, high)[None])
        raw_t[:, r] = c.wall, c.cpu
    env.close()
    n = steps * b
    return {
        "task": task,
        "obs_mode": obs_mode,
        "num_envs": num_envs,
        "image_size": image_size if "rgb" in obs_mode else None,
        "steps_timed": steps,
        "build_s": round(build.wall, 2),
        "env_steps_per_s": round(n / bridge_t[0].sum(), 1),
        "env_steps_per_cpu_s": round(n / bridge_t[1].sum(), 1),
        "raw_steps_per_s": round(n / raw_t[0].sum(), 1),
        "overhead_ratio": round(float(raw_t[1].sum() / bridge_t[1].sum()), 3),
        "overhead_ratio_wall": round(float(raw_t[0].sum() / bridge_t[0].sum()), 3),
    }


def write(rows: list[dict], args: argparse.Namespace) -> None:
    import mani_skill
    import sapien

    meta = machine_meta(
        mani_skill=mani_skill.__version__,
        sapien=sapien.__version__,
        num_envs=args.num_envs,
        note="physx_cpu, one process; shared 2-core machine, so absolute rates vary with load",
    )
    intro = [
        f"B={args.num_envs}, mani-skill {meta['mani_skill']}, sapien {meta['sapien']}, "
        f"{meta['note']}.",
        "ratio = raw ManiSkill CPU time / bridge CPU time for the same actions (1.0 = no bridge "
        "overhead); build = wall seconds to build the B envs (camera rows include lavapipe's "
        "shader compilation, once per process and image size).",
    ]
    columns = [
        ("task", lambda r: r["task"]),
        ("obs", lambda r: r["obs_mode"]),
        ("image", lambda r: f"{r['image_size']}px" if r["image_size"] else "-"),
        ("build s", lambda r: r["build_s"]),
        ("env steps/s (wall)", lambda r: r["env_steps_per_s"]),
        ("env steps/CPU-s", lambda r: r["env_steps_per_cpu_s"]),
        ("raw steps/s (wall)", lambda r: r["raw_steps_per_s"]),
        ("ratio", lambda r: r["overhead_ratio"]),
        ("ratio (wall)", lambda r: r["overhead_ratio_wall"]),
    ]
    write_table("maniskill_cpu", "ManiSkill3 bridge on physx_cpu", intro, meta, rows, columns)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--steps", type=int, default=200, help="timed steps per row (per env)")
    p.add_argument("--task", default="PickCube-v1")
    p.add_argument("--quick", action="store_true", help="state row only, 50 steps")
    args = p.parse_args()
    plan = [("state", 128)] if args.quick else [("state", 128), ("rgb", 64), ("state+rgb", 128)]
    steps = 50 if args.quick else args.steps
    rows = []
    for obs_mode, size in plan:
        row = measure(args.task, obs_mode, args.num_envs, size, steps)
        rows.append(row)
        print(json.dumps(row), flush=True)
    write(rows, args)
    print(f"wrote {RESULTS / 'maniskill_cpu.md'}")


if __name__ == "__main__":
    main()
