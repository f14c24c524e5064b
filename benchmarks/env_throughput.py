"""Env steps/s of the MuJoCo Franka vector env per observation type vs raw ``mj_step``.

For each (task, obs mode) we time ``env.step`` with random actions on B envs in this process,
and in the same run time bare ``mj_step(model, data, nstep=substeps)`` over B ``MjData`` of the
same compiled model — the physics an env step must do anyway. The overhead ratio
``env steps/s / raw control steps/s`` is the figure (target >= 0.8 for state obs, floor 0.6);
absolute numbers depend on the machine and its load.

    .venv/bin/python benchmarks/env_throughput.py            # full table
    .venv/bin/python benchmarks/env_throughput.py --quick    # ~20 s smoke run

Writes ``benchmarks/results/env_throughput.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from sim_bridges.registry import make_env  # noqa: E402

RESULTS = Path(__file__).parent / "results"


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


def raw_rate(env, start: list, ctrls: np.ndarray) -> float:
    """Control steps/s of bare physics replaying the env's own controls: the same motion and
    contacts as the env run, minus everything the env adds (controller, obs, reward, resets)."""
    datas = [mujoco.MjData(fm.model) for fm in env.fms]
    for src, d in zip(start, datas):
        d.qpos[:], d.qvel[:], d.mocap_pos[:] = src.qpos, src.qvel, src.mocap_pos
    pairs = list(zip([fm.model for fm in env.fms], datas))
    t0 = time.perf_counter()
    for ctrl in ctrls:
        for i, (m, d) in enumerate(pairs):
            d.ctrl[:] = ctrl[i]
            mujoco.mj_step(m, d, nstep=env.substeps)
    return ctrls.shape[0] * len(pairs) / (time.perf_counter() - t0)


def env_rate(env, actions: np.ndarray) -> float:
    env.reset(seed=0)
    t0 = time.perf_counter()
    for act in actions:
        env.step(act)
    return len(actions) * env.num_envs / (time.perf_counter() - t0)


def measure(task: str, obs_mode: str, num_envs: int, image_size: int, seconds: float) -> dict:
    kw = dict(obs_mode=obs_mode)
    if "rgb" in obs_mode:
        kw.update(image_size=image_size, cameras=("third", "wrist"))
    env = make_env(f"mujoco_franka/{task}", num_envs=num_envs, **kw)
    rng = np.random.default_rng(0)
    b, a = env.num_envs, env.spec.action_dim
    probe = rng.uniform(-1, 1, size=(5, b, a)).astype(np.float32)
    per_step = 1.0 / env_rate(env, probe) * b  # warm-up (renderer contexts) and sizing
    steps = int(np.clip(seconds / 4 / per_step, 5, env.spec.max_episode_steps))
    actions = rng.uniform(-1, 1, size=(steps, b, a)).astype(np.float32)
    start, ctrls = record_controls(env, actions)
    # interleave env and raw timing so machine load hits both alike; best of 2 each
    envs, raws = [], []
    for _ in range(2):
        envs.append(env_rate(env, actions))
        raws.append(raw_rate(env, start, ctrls))
    env.close()
    e, r = float(np.max(envs)), float(np.max(raws))
    return {
        "task": task, "obs_mode": obs_mode, "num_envs": num_envs, "substeps": env.substeps,
        "image_size": image_size if "rgb" in obs_mode else None,
        "cameras": 2 if "rgb" in obs_mode else 0,
        "env_steps_per_s": round(e, 1), "raw_control_steps_per_s": round(r, 1),
        "raw_mj_steps_per_s": round(r * env.substeps, 1), "overhead_ratio": round(e / r, 3),
    }


def write(rows: list[dict], args: argparse.Namespace) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "mujoco": mujoco.__version__, "num_envs": args.num_envs, "seconds": args.seconds,
            "note": "single process, one core; shared machine, so absolute rates vary with load"}
    (RESULTS / "env_throughput.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = ["# MuJoCo Franka env throughput", "",
             f"B={args.num_envs} envs in one process, mujoco {mujoco.__version__}, {meta['note']}.", "",
             "| task | obs | image | substeps | env steps/s | raw ctrl steps/s | raw mj_step/s | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        img = f"{r['image_size']}px x{r['cameras']}" if r["image_size"] else "-"
        lines.append(f"| {r['task']} | {r['obs_mode']} | {img} | {r['substeps']} | {r['env_steps_per_s']} | "
                     f"{r['raw_control_steps_per_s']} | {r['raw_mj_steps_per_s']} | {r['overhead_ratio']} |")
    (RESULTS / "env_throughput.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--seconds", type=float, default=4.0, help="timing budget per row")
    p.add_argument("--quick", action="store_true", help="reach only, shorter timings")
    args = p.parse_args()
    if args.quick:
        args.seconds = 1.5
        plan = [("reach", "state", 64), ("reach", "rgb", 64)]
    else:
        plan = [("reach", "state", 64), ("push", "state", 64), ("lift", "state", 64),
                ("reach", "rgb", 64), ("reach", "state+rgb", 128), ("lift", "state+rgb", 224)]
    rows = []
    for task, obs, size in plan:
        row = measure(task, obs, args.num_envs, size, args.seconds)
        rows.append(row)
        print(json.dumps(row))
    write(rows, args)
    print(f"wrote {RESULTS / 'env_throughput.md'}")


if __name__ == "__main__":
    main()
