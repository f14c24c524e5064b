"""Env steps/s of the MuJoCo Franka vector env per observation type vs raw ``mj_step``.

For each (task, obs mode) we time ``env.step`` with random actions on B envs in this process,
and in the same run bare ``mj_step(model, data, nstep=substeps)`` over B ``MjData`` of the same
compiled model replaying the env's recorded joint targets — the same motion and contacts, i.e.
the physics an env step must do anyway. Env and raw segments alternate every 10 steps. The
overhead ratio ``env steps/s / raw control steps/s`` is the figure (target >= 0.8 for state
obs, floor 0.6); absolute numbers depend on the machine and its load.

    .venv/bin/python benchmarks/env_throughput.py            # full table
    .venv/bin/python benchmarks/env_throughput.py --quick    # ~20 s smoke run

Writes ``benchmarks/results/env_throughput.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")

import mujoco
import numpy as np
from bench_results import RESULTS, machine_meta, write_table

from rlinf_contracts.env_registry import make_env


def record_controls(env, actions: np.ndarray) -> tuple[list, np.ndarray]:
    """Run the env once (untimed) and record its start state and per-step actuator controls."""
    env.reset(seed=0)
    start = [mujoco.MjData(fm.model) for fm in env.fms]
    for src, d in zip(env.datas, start):
        d.qpos[:], d.qvel[:], d.mocap_pos[:] = src.qpos, src.qvel, src.mocap_pos
    ctrls = np.empty((len(actions), env.num_envs, env.fms[0].model.nu))
    for k, act in enumerate(actions):
        env.step(act)
        ctrls[k] = [d.ctrl for d in env.datas]
    return start, ctrls


class Clock:
    """Wall and process-CPU time of a block. The CPU time is this process's own work, so the
    ratio survives other jobs competing for the cores (wall rates are reported too)."""

    def __enter__(self) -> Clock:
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.w, time.process_time() - self.c


def physics_share(env, actions: np.ndarray) -> float:
    """Fraction of env.step CPU time spent inside MuJoCo's step calls (instrumented pass)."""
    import sim_bridges.mujoco_franka.vector_env as vec

    spent = [0.0]

    class Timed:
        def __getattr__(self, name: str):
            fn = getattr(mujoco, name)
            if not name.startswith("mj_step"):
                return fn

            def timed(*a, **k):
                t = time.process_time()
                fn(*a, **k)
                spent[0] += time.process_time() - t

            return timed

    env.reset(seed=0)
    vec.mujoco = Timed()
    try:
        with Clock() as c:
            for act in actions:
                env.step(act)
    finally:
        vec.mujoco = mujoco
    return spent[0] / c.cpu


def measure(task: str, obs_mode: str, num_envs: int, image_size: int, seconds: float) -> dict:
    kw = dict(obs_mode=obs_mode)
    if "rgb" in obs_mode:
        kw.update(image_size=image_size, cameras=("third", "wrist"))
    env = make_env(f"mujoco_franka/{task}", num_envs=num_envs, **kw)
    rng = np.random.default_rng(0)
    b, a = env.num_envs, env.spec.action_dim
    env.reset(seed=0)
    with Clock() as probe:  # warm-up (renderer contexts) and sizing
        for act in rng.uniform(-1, 1, size=(3, b, a)).astype(np.float32):
            env.step(act)
    seg = 10
    steps = int(np.clip(seconds / 2 / (probe.wall / 3) // seg * seg, seg, 400))
    actions = rng.uniform(-1, 1, size=(steps, b, a)).astype(np.float32)
    start, ctrls = record_controls(env, actions)
    env.reset(seed=0)  # replays the recorded trajectory exactly (deterministic)
    pairs = [(fm.model, d) for fm, d in zip(env.fms, start)]
    env_t, raw_t = (
        np.zeros((2, steps // seg)),
        np.zeros((2, steps // seg)),
    )  # [wall, cpu] per segment
    for r in range(steps // seg):  # alternate short env / raw segments: load hits both alike
        with Clock() as c:
            for act in actions[r * seg : (r + 1) * seg]:
                env.step(act)
        env_t[:, r] = c.wall, c.cpu
        with Clock() as c:
            for ctrl in ctrls[r * seg : (r + 1) * seg]:
                for i, (m, d) in enumerate(pairs):
                    d.ctrl[:] = ctrl[i]
                    mujoco.mj_step(m, d, nstep=env.substeps)
        raw_t[:, r] = c.wall, c.cpu
    share = physics_share(env, actions)
    env.close()
    n = steps * b
    e_wall, r_wall = n / env_t[0].sum(), n / raw_t[0].sum()
    ratio_cpu = float(raw_t[1].sum() / env_t[1].sum())
    return {
        "task": task,
        "obs_mode": obs_mode,
        "num_envs": num_envs,
        "substeps": env.substeps,
        "image_size": image_size if "rgb" in obs_mode else None,
        "cameras": 2 if "rgb" in obs_mode else 0,
        "steps_timed": steps,
        "env_steps_per_s": round(e_wall, 1),
        "env_steps_per_cpu_s": round(n / env_t[1].sum(), 1),
        "raw_control_steps_per_s": round(r_wall, 1),
        "raw_mj_steps_per_cpu_s": round(n * env.substeps / raw_t[1].sum(), 1),
        "overhead_ratio": round(ratio_cpu, 3),
        "overhead_ratio_wall": round(e_wall / r_wall, 3),
        "physics_share_in_env": round(share, 3),
    }


def write(rows: list[dict], args: argparse.Namespace) -> None:
    meta = machine_meta(
        mujoco=mujoco.__version__,
        num_envs=args.num_envs,
        seconds=args.seconds,
        note="single process, one core; shared machine, so absolute rates vary with load",
    )
    intro = [
        f"B={args.num_envs} envs in one process, mujoco {mujoco.__version__}, {meta['note']}.",
        "ratio = raw physics CPU time / env CPU time for the same trajectory (process CPU time, "
        "robust to other jobs on the machine); wall = the same from wall-clock rates; physics "
        "share = "
        "fraction of env.step CPU time spent inside mj_step (instrumented pass).",
    ]
    columns = [
        ("task", lambda r: r["task"]),
        ("obs", lambda r: r["obs_mode"]),
        ("image", lambda r: f"{r['image_size']}px x{r['cameras']}" if r["image_size"] else "-"),
        ("substeps", lambda r: r["substeps"]),
        ("env steps/s (wall)", lambda r: r["env_steps_per_s"]),
        ("env steps/CPU-s", lambda r: r["env_steps_per_cpu_s"]),
        ("raw mj_step/CPU-s", lambda r: r["raw_mj_steps_per_cpu_s"]),
        ("ratio", lambda r: r["overhead_ratio"]),
        ("ratio (wall)", lambda r: r["overhead_ratio_wall"]),
        ("physics share", lambda r: r["physics_share_in_env"]),
    ]
    write_table("env_throughput", "MuJoCo Franka env throughput", intro, meta, rows, columns)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--seconds", type=float, default=8.0, help="timing budget per row (about)")
    p.add_argument("--quick", action="store_true", help="reach only, shorter timings")
    args = p.parse_args()
    if args.quick:
        args.seconds = 3.0
        plan = [("reach", "state", 64), ("reach", "rgb", 64)]
    else:
        plan = [
            ("reach", "state", 64),
            ("push", "state", 64),
            ("lift", "state", 64),
            ("reach", "rgb", 64),
            ("reach", "state+rgb", 128),
            ("lift", "state+rgb", 224),
        ]
    rows = []
    for task, obs, size in plan:
        row = measure(task, obs, args.num_envs, size, args.seconds)
        rows.append(row)
        print(json.dumps(row))
    write(rows, args)
    print(f"wrote {RESULTS / 'env_throughput.md'}")


if __name__ == "__main__":
    main()
