"""ManiSkill3 on ``physx_cpu`` through the bridge: env steps/s, overhead vs raw ManiSkill, build cost.

For each obs mode we build ``make_env("maniskill/<task>", num_envs=B, sim_backend="physx_cpu")``
(a ``LoopVectorEnv`` over B one-env ManiSkill objects) and time ``env.step`` with random
actions, alternating 10-step segments with the raw ManiSkill ``gym`` envs inside the bridge
stepped directly with the same (already scaled) actions — the simulator work an env step must do
anyway. The overhead ratio is ``raw CPU time / bridge CPU time`` (process CPU time, robust to
other jobs on a shared machine); wall-clock rates are reported too. Build cost: wall seconds for
the B envs of each row (the first camera env of a process and image size includes lavapipe shader compilation).

    .venv/bin/python benchmarks/maniskill_cpu.py            # state + rgb rows, B=4, ~1-2 min
    .venv/bin/python benchmarks/maniskill_cpu.py --quick    # state row only

Writes ``benchmarks/results/maniskill_cpu.json`` and ``.md``. Needs ``scripts/install_maniskill.sh``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from sim_bridges.maniskill_bridge import scale_actions
from sim_bridges.registry import make_env

RESULTS = Path(__file__).parent / "results"


class Clock:
    """Wall and process-CPU seconds of a block."""

    def __enter__(self) -> "Clock":
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.w, time.process_time() - self.c


def measure(task: str, obs_mode: str, num_envs: int, image_size: int, steps: int) -> dict:
    with Clock() as build:
        env = make_env(f"maniskill/{task}", num_envs=num_envs, obs_mode=obs_mode, image_size=image_size,
                       sim_backend="physx_cpu", max_episode_steps=10**6)
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
    bridge_t, raw_t = np.zeros((2, steps // seg)), np.zeros((2, steps // seg))  # [wall, cpu] per segment
    for r in range(steps // seg):
        chunk = actions[r * seg:(r + 1) * seg]
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
        "task": task, "obs_mode": obs_mode, "num_envs": num_envs,
        "image_size": image_size if "rgb" in obs_mode else None, "steps_timed": steps,
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

    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "mani_skill": mani_skill.__version__, "sapien": sapien.__version__, "num_envs": args.num_envs,
            "note": "physx_cpu, one process; shared 2-core machine, so absolute rates vary with load"}
    (RESULTS / "maniskill_cpu.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = ["# ManiSkill3 bridge on physx_cpu", "",
             f"B={args.num_envs}, mani-skill {meta['mani_skill']}, sapien {meta['sapien']}, {meta['note']}.", "",
             "ratio = raw ManiSkill CPU time / bridge CPU time for the same actions (1.0 = no bridge "
             "overhead); build = wall seconds to build the B envs (camera rows include lavapipe's "
             "shader compilation, once per process and image size).", "",
             "| task | obs | image | build s | env steps/s (wall) | env steps/CPU-s | raw steps/s (wall) | ratio | ratio (wall) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        img = f"{r['image_size']}px" if r["image_size"] else "-"
        lines.append(f"| {r['task']} | {r['obs_mode']} | {img} | {r['build_s']} | {r['env_steps_per_s']} | "
                     f"{r['env_steps_per_cpu_s']} | {r['raw_steps_per_s']} | {r['overhead_ratio']} | "
                     f"{r['overhead_ratio_wall']} |")
    (RESULTS / "maniskill_cpu.md").write_text("\n".join(lines) + "\n")


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
