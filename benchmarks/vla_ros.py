"""The small VLA through ``rlinf serve`` and the ROS 2 sim twin vs the in-process sim eval.

    .venv/bin/python benchmarks/vla_ros.py                     # SFT a VLA (minutes), eval both ways
    .venv/bin/python benchmarks/vla_ros.py --checkpoint DIR    # an existing VLA checkpoint

One checkpoint of the small VLA (``configs/sim_franka_language_vla_tokens_sft.yaml``, SFT on
oracle demos of ``franka_language/mix``), evaluated on the same split and held-out seeds:

1. ``sim``: ``rlinf eval`` (``learner.eval.embodied.evaluate_checkpoint``, the model in process);
2. ``served``: ``rlinf serve --checkpoint`` in its own process, and ``rlinf eval``'s loop on the
   same held-out episodes with every action from the server: each sub-env is one connection
   sending ``state`` + the ``front`` image + its ``instruction`` in the canonical observation map
   and executing the chunk that comes back — the path the ROS 2 policy client takes, minus ROS.

3. ``ROS 2 twin``: ``rlinf serve`` + ``configs/ros_sim_franka_language.yaml`` (robot node running
   the env's own scene in lock-step, policy client, task node) as processes; the task node's
   episode results, ``--twin-runs`` times (run-to-run spread).

Each must agree with ``sim`` within 0.1; episodes are paired (the twin replays the eval's seeds),
so per-episode agreement is reported too. Before the twin runs, an open-loop replay measures how
far a twin step is from a simulator step: the checkpoint's own actions of one sim eval episode
are replayed on the twin's arm in lock-step and the way the real-time robot node executes them
(target ramped over a period by the 100 Hz driver), and the observations are compared step by
step. Writes ``benchmarks/results/vla_ros.{md,json}``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/policy_server.py would shadow the policy_server package: this folder goes last
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.append(str(ROOT / "benchmarks"))

from bench_results import load, load_1min, machine_meta  # noqa: E402
from vla_demos import collect_language_demos  # noqa: E402
from vla_ros_procs import served_eval, twin_eval  # noqa: E402
from vla_ros_report import render  # noqa: E402

TOLERANCE = 0.1


def train_checkpoint(args: argparse.Namespace) -> tuple[str, float]:
    """SFT one small VLA with the SFT config (demos collected first if missing); (checkpoint,
    wall s)."""
    from rlinf_cli.main import main

    work = Path(args.work)
    demos = Path(args.demos_dir) if args.demos_dir else work / "demos"
    t0 = time.perf_counter()
    if not demos.exists():
        collect_language_demos(demos, args.demos, 64)
    out = work / "tokens_sft"
    shutil.rmtree(out, ignore_errors=True)  # retrained from scratch: no earlier run's files
    if (
        main(
            [
                "train",
                "configs/sim_franka_language_vla_tokens_sft.yaml",
                f"sft.demos={demos}",
                f"sft.steps={args.sft_steps}",
                f"train.out_dir={out}",
                "train.progress=false",
                "eval.episodes=1",
                "eval.num_envs=1",
                "eval.ood_splits=[id]",
            ]
        )
        != 0
    ):
        raise RuntimeError("SFT failed")
    return str(out), time.perf_counter() - t0


def sim_eval(ckpt: str, split: str, episodes: int) -> dict[str, Any]:
    """``rlinf eval CKPT --ood SPLIT --episodes N``: the model in this process; plus the
    per-episode outcomes of the same rounds (``evaluate_policy``'s, seeds
    ``seed_offset + k - 1``)."""
    import numpy as np

    from learner.checkpoint import load_policy
    from learner.eval.embodied import (
        _run_round,
        build_env,
        checkpoint_config,
        evaluate_checkpoint,
        split_kwargs,
    )

    t0 = time.perf_counter()
    res = evaluate_checkpoint(ckpt, episodes=episodes, seed=0, ood_splits=[split], video_path="")
    r = res["splits"][split]
    wall = time.perf_counter() - t0
    policy, meta = load_policy(ckpt)
    cfg = checkpoint_config(meta)
    n = max(1, min(cfg.eval.num_envs, episodes))
    env = build_env(cfg.eval.env or cfg.env.name, n, **split_kwargs(cfg, split))
    try:
        rounds = [
            _run_round(policy, env, cfg.eval.seed_offset + k * n, None)["success"]
            for k in range((episodes + n - 1) // n)
        ]
    finally:
        env.close()
    per_episode = np.concatenate(rounds)[:episodes]
    if abs(float(per_episode.mean()) - r["success_rate"]) > 1e-9:
        raise RuntimeError(
            f"per-episode rounds ({per_episode.mean():.3f}) differ from rlinf eval "
            f"({r['success_rate']:.3f})"
        )
    return {
        "success_rate": r["success_rate"],
        "episodes": r["episodes"],
        "wall_s": wall,
        "per_episode": "".join("1" if x else "0" for x in per_episode),
    }


def replay_divergence(ckpt: str, split: str, steps: int = 40) -> dict[str, Any]:
    """Open-loop replay of sim eval episode 1: the checkpoint acts on the simulator (its actions
    and observations recorded); the same actions drive the twin's arm (``franka_language`` scene,
    the config's safety settings) as the lock-step robot node does and as the real-time one does
    (one-point trajectory of one control period, sampled by the 100 Hz driver, physics on wall
    time), optionally acting on the observation one step old; the observation the policy client
    would build is compared with the simulator's at every step."""
    import numpy as np

    from learner.checkpoint import load_policy
    from learner.eval.embodied import checkpoint_config, split_kwargs
    from learner.rollout.envs import build_env
    from rlinf_ros.config import load_graph_config
    from rlinf_ros.robot_io import SpecIO, reading_from_pose
    from robot_drivers.factory import ArmConfig, make_arm
    from robot_drivers.lockstep import LockstepStepper

    policy, meta = load_policy(ckpt)
    cfg = checkpoint_config(meta)
    seed = cfg.eval.seed_offset
    safety = load_graph_config(ROOT / "configs/ros_sim_franka_language.yaml").robot.arms[0].safety
    scene = "franka_language/mix" if split in ("id", "train") else f"franka_language/mix:{split}"

    def run(mode: str, delay: int) -> dict[str, Any]:
        env = build_env(cfg.eval.env or cfg.env.name, 1, **split_kwargs(cfg, split))
        sim = env.reset(seed)
        arm = make_arm(ArmConfig(name="panda", scene=scene, scene_seed=seed, safety=safety))
        arm.connect()
        b = arm.backend
        b.new_episode(1)
        io = SpecIO(env.spec.robot)
        io.begin_episode()
        stepper = LockstepStepper(arm) if mode == "lockstep" else None
        clock = [0.0]  # real-time mode: the driver's clock, 10 ms per tick
        if stepper is None:
            arm.command_period_s = 0.01  # the robot node's driver tick
            arm._clock = arm.safety._clock = lambda: clock[0]
        d = b.data
        prev = None
        first_safety: int | None = None
        state_err, pixel_err = [], []
        for _ in range(steps):
            s = arm.state()
            objects = (b.scene.object_positions() - d.xpos[b._base]) @ d.xmat[b._base].reshape(3, 3)
            reading = reading_from_pose(
                s.q, s.dq, s.gripper.width, s.ee_pose.position, s.ee_pose.quat_xyzw, objects=objects
            )
            obs = io.observation([reading], {"front": b.render("front", 0, 0)}, b.scene.instruction)
            state_err.append(float(np.abs(obs["state"] - sim["state"][0]).max()))
            pixel_err.append(
                float(np.abs(obs["images"]["front"].astype(int) - sim["images"]["front"][0]).mean())
            )
            action, _, _ = policy.act(
                sim, deterministic=True
            )  # the simulator's episode: its own actions
            base = prev if delay and prev is not None else reading
            target = io.decode(
                np.asarray(action, np.float64).reshape(-1, action.shape[-1])[:1], [base]
            )[0]
            prev = reading
            if stepper is not None:
                stepper.apply(target.joints[0], target.grippers[0])
            else:
                q0 = arm.state().q
                arm.gripper_move(target.grippers[0])
                for t in range(1, 6):
                    clock[0] += 0.01
                    arm.move_joints(q0 + (target.joints[0] - q0) * t / 5)
                    b.step(2)
            if first_safety is None and any(arm.counters.values()):
                first_safety = len(state_err)  # the step whose command the safety layer changed
            sim, _, term, trunc, _ = env.step(action)
            if term[0] or trunc[0]:
                break
        env.close()
        se, pe = np.asarray(state_err), np.asarray(pixel_err)
        return {
            "steps": len(se),
            "state_err_step1": float(se[1]) if len(se) > 1 else 0.0,
            "state_err_max": float(se.max()),
            "pixel_err_mean": float(pe.mean()),
            "first_step_off": int(np.argmax(se > 1e-4)) if (se > 1e-4).any() else None,
            "safety_events": {k: v for k, v in arm.counters.items() if v},
            "first_safety_step": first_safety,
        }

    return {
        "lockstep": run("lockstep", 0),
        "realtime": run("realtime", 0),
        "realtime_obs_1_step_old": run("realtime", 1),
    }


def _paired(a: str, b: str) -> str:
    """How many of the paired episodes two runs agree on, and which differ (1-based)."""
    n = min(len(a), len(b))
    diff = [k + 1 for k in range(n) if a[k] != b[k]]
    return f"{n - len(diff)}/{n}" + (f" (differ: {diff})" if diff else "")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--checkpoint", default="", help="an existing small-VLA checkpoint (else SFT one)"
    )
    p.add_argument("--work", default="runs/bench_vla_ros")
    p.add_argument(
        "--demos-dir", default="", help="oracle demos to SFT on (default: <work>/demos, collected)"
    )
    p.add_argument("--demos", type=int, default=150)
    p.add_argument("--sft-steps", type=int, default=800)
    p.add_argument("--split", default="id")
    p.add_argument("--episodes", type=int, default=48, help="episodes of the sim and served evals")
    p.add_argument("--twin-episodes", type=int, default=48, help="episodes on the ROS 2 twin")
    p.add_argument("--twin-runs", type=int, default=3, help="twin runs (run-to-run spread)")
    p.add_argument("--stem", default="vla_ros", help="results/<stem>.{md,json}")
    p.add_argument(
        "--from-json", action="store_true", help="only re-render results/<stem>.md from its JSON"
    )
    args = p.parse_args()
    if args.from_json:
        data = load(args.stem)
        render(args.stem, data["meta"], data["rows"])
        return

    sft_s = 0.0
    ckpt = args.checkpoint
    if not ckpt:
        ckpt, sft_s = train_checkpoint(args)
        print(f"SFT checkpoint {ckpt} in {sft_s:.0f} s (load {load_1min()})", flush=True)
    replay = replay_divergence(ckpt, args.split)
    for mode, r in replay.items():
        print(
            f"open-loop replay, {mode}: max |state diff| after step 1 {r['state_err_step1']:.4f}, "
            "over "
            f"{r['steps']} steps {r['state_err_max']:.4f}; mean |pixel diff| "
            f"{r['pixel_err_mean']:.2f}",
            flush=True,
        )
    rows = []
    sim = sim_eval(ckpt, args.split, args.episodes)
    rows.append({"path": "sim (rlinf eval, in process)", **sim, "load_1min": load_1min()})
    print(
        f"sim eval:    success {sim['success_rate']:.3f} over {sim['episodes']} episodes (load "
        f"{load_1min()})",
        flush=True,
    )
    served = served_eval(ckpt, args.split, args.episodes, Path(args.work) / "logs")
    rows.append(
        {
            "path": "served (rlinf serve; rlinf eval's loop over ws://)",
            **served,
            "load_1min": load_1min(),
        }
    )
    print(
        f"served eval: success {served['success_rate']:.3f} over {served['episodes']} episodes, "
        "round trip "
        f"p50 {served['round_trip_ms_p50']:.0f} ms (load {load_1min()})",
        flush=True,
    )
    twins = []
    for k in range(args.twin_runs):
        twin = twin_eval(ckpt, args.split, args.twin_episodes, Path(args.work) / f"twin{k + 1}")
        twin["paired_with_sim"] = _paired(twin["per_episode"], sim["per_episode"])
        twins.append(twin)
        rows.append(
            {
                "path": f"ROS 2 twin, lock-step, run {k + 1} "
                "(rlinf serve + robot / policy client / task nodes)",
                **twin,
                "load_1min": load_1min(),
            }
        )
        print(
            f"ROS 2 twin run {k + 1}: success {twin['success_rate']:.3f} over {twin['episodes']} "
            "episodes, "
            f"{twin['wall_s']:.0f} s; episodes agreeing with sim {twin['paired_with_sim']} (load "
            f"{load_1min()})",
            flush=True,
        )
    rates = [t["success_rate"] for t in twins]
    gaps = [abs(r - sim["success_rate"]) for r in rates]
    spread = f"{min(rates):.3f}-{max(rates):.3f}" if rates else "-"
    verdict = (
        f"|served - sim| = {abs(served['success_rate'] - sim['success_rate']):.3f}; twin over "
        f"{len(rates)} runs "
        f"{spread} (largest |twin - sim| = {max(gaps, default=0):.3f}: "
        f"{'within' if gaps and max(gaps) <= TOLERANCE else 'NOT within'} {TOLERANCE})"
    )
    print(verdict)
    meta = machine_meta(
        checkpoint=ckpt,
        split=args.split,
        episodes=args.episodes,
        twin_episodes=args.twin_episodes,
        twin_runs=args.twin_runs,
        sft_steps=args.sft_steps,
        sft_s=round(sft_s, 1),
        verdict=verdict,
        replay=replay,
    )
    render(args.stem, meta, rows)


if __name__ == "__main__":
    main()
