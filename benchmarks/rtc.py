"""Real-time chunking benchmark: control-loop stalls and action jumps at chunk boundaries, with
and without RTC, at an inference latency of 1 and 3 control periods.

    .venv/bin/python benchmarks/rtc.py [--minutes 5] [--hz 10] [--wallclock-s 30]

The policy client's loop (``rlinf_ros.policy_loop.PolicyLoop``, the code the ROS node runs) is
ticked at a fixed control rate; answers arrive exactly ``latency`` ticks after the request
(``tests/latency_worker.py``: tick-exact, so a loaded machine cannot blur the figures). The
arm tracks its commands perfectly. The policy is a real flow policy: actions of a chunk
(16 steps, 7 joint deltas + gripper) are drawn by Euler integration of the *exact* velocity field
of a Gaussian over chunks (``learner.models.adapters.flow``, openpi's convention) whose mean
follows a moving sinusoidal joint target and whose covariance is a smooth kernel over the
chunk's steps -- every chunk is smooth, and two chunks planned a few ticks apart disagree as a
sampled VLA's do.

Modes: ``sync`` requests when the chunk is used up (stalls while it waits); ``async`` requests
``latency`` steps early and switches naively (no stalls, stale rows, jumps); ``rtc_blend``
requests after ``execute_horizon`` steps, drops the rows in the past and cross-fades the
overlap; ``rtc_guided`` also sends the committed prefix, which the flow sampler inpaints
(RTC guidance), before the same blend.

Figures: stalls per minute (ticks with nothing to execute after the first chunk), the largest
action step at a chunk's first tick, the largest step anywhere (a blend must not just move the
jump), the 99th percentile step, and joint tracking RMS. Writes benchmarks/results/rtc.{json,md}
and rtc.png (one joint's actions over a few chunks).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_results import RESULTS, machine_meta, write_table  # noqa: E402
from learner.models.adapters import flow  # noqa: E402
from rlinf_contracts.features import RobotReading  # noqa: E402
from rlinf_contracts.spec import ActionSpace, RobotSpec, StateField  # noqa: E402
from rlinf_ros.policy_loop import InferenceWorker, PolicyLoop  # noqa: E402
from rlinf_ros.robot_io import SpecIO  # noqa: E402
from rlinf_ros.rtc import RtcConfig, max_jump  # noqa: E402
from robot_drivers.types import PANDA_HOME  # noqa: E402
from tests.latency_worker import LatencyWorker  # noqa: E402

H, EXECUTE = 16, 8  # chunk length; steps executed before the next request (RTC)
SCALE = 0.1  # joint_scale: rad per unit action
AMP, PERIOD_S = np.array([0.3, 0.25, 0.2, 0.3, 0.2, 0.25, 0.3]), 6.0
MODES = ("sync", "async", "rtc_blend", "rtc_guided")


def spec_io(hz: float) -> SpecIO:
    return SpecIO(
        RobotSpec(
            state=(StateField("joint_pos", 7), StateField("gripper_width", 1)),
            action=ActionSpace("joint_delta", 8, joint_scale=SCALE),
            control_hz=hz,
        )
    )


class GaussianFlowPolicy:
    """Chunks from the exact flow of N(mean(obs), Σ), Σ a smooth squared-exponential kernel over the
    chunk's steps (std ``sigma``, length ``length`` steps): every chunk is smooth, two chunks
    differ."""

    def __init__(
        self, hz: float, seed: int, guided: bool, sigma: float = 0.15, length: float = 4.0
    ) -> None:
        self.hz, self.guided = hz, guided
        self.gen = torch.Generator().manual_seed(seed)
        i = torch.arange(H, dtype=torch.float64)
        self.cov = sigma**2 * torch.exp(
            -0.5 * (i[:, None] - i[None]) ** 2 / length**2
        ) + 1e-4 * torch.eye(H, dtype=torch.float64)
        self.calls = 0

    def target(self, tick: np.ndarray) -> np.ndarray:
        return np.asarray(PANDA_HOME)[None] + AMP[None] * np.sin(
            2 * np.pi * tick[:, None] / (PERIOD_S * self.hz)
        )

    def mean(self, obs: dict[str, Any]) -> torch.Tensor:
        """Feed-forward target velocity plus the tracking error spread over the chunk: [1, H, 8]."""
        t0 = int(obs["tick"])
        ticks = np.arange(t0, t0 + H + 1, dtype=np.float64)
        q_star = self.target(ticks)
        ff = (q_star[1:] - q_star[:-1]) / SCALE
        err = (q_star[0] - np.asarray(obs["state"][:7])) / SCALE
        corr = np.repeat(
            err[None] / H, H, axis=0
        )  # spread evenly: the chunk removes the error by its end
        mu = np.concatenate([ff + corr, np.ones((H, 1))], 1)  # gripper: open
        return torch.as_tensor(np.clip(mu, -0.9, 0.9))[None]

    def velocity(self, mu: torch.Tensor) -> Any:
        cov = self.cov

        def u(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            tt = float(t[0])
            c = tt * tt * torch.eye(H, dtype=x.dtype) + (1 - tt) ** 2 * cov
            r = (x - (1 - tt) * mu).transpose(1, 2)  # [B, A, H]
            y = torch.linalg.solve(c, r.unsqueeze(-1)).squeeze(-1)  # C^-1 r
            e_noise = tt * y
            e_act = mu.transpose(1, 2) + (1 - tt) * (y @ cov)
            return (e_noise - e_act).transpose(1, 2)

        return u

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        mu = self.mean(obs)
        noise = torch.randn(mu.shape, generator=self.gen, dtype=torch.float64)
        prefix = obs.get("rtc_prefix")
        if self.guided and prefix is not None and len(prefix):
            p = torch.as_tensor(np.asarray(prefix, dtype=np.float64))[None]
            out = flow.sample(
                self.velocity(mu),
                noise,
                steps=10,
                prefix=p,
                delay=int(obs.get("rtc_inference_delay", 0)),
                execute_horizon=H - p.shape[1],
            )
        else:
            out = flow.sample(self.velocity(mu), noise, steps=10)
        return {"actions": np.clip(out.actions[0].numpy(), -1.0, 1.0)}


class SlowConnection:
    """Wall-clock mode: the policy behind a connection whose answer takes ``latency_s`` in all."""

    def __init__(self, policy: GaussianFlowPolicy, latency_s: float) -> None:
        self.policy, self.latency_s = policy, latency_s

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        out = self.policy.infer(obs)
        time.sleep(max(0.0, self.latency_s - (time.perf_counter() - t0)))
        return out

    def close(self) -> None:
        pass


def make_loop(
    mode: str, latency: int, policy: GaussianFlowPolicy, io: SpecIO, hz: float, wallclock: bool
) -> tuple[PolicyLoop, Any]:
    if wallclock:  # the node's own worker thread and its bounded wait for a late answer
        worker: Any = InferenceWorker(
            lambda: SlowConnection(policy, latency / hz), reconnect_s=0.05
        )
        wait = 0.6 / hz
    else:
        worker, wait = LatencyWorker(policy, latency), 0.0
    if mode == "sync":
        return PolicyLoop(worker, io, prefetch=0, max_wait_s=wait), worker
    if mode == "async":
        return PolicyLoop(worker, io, prefetch=latency, max_wait_s=wait), worker
    rtc = RtcConfig(
        enabled=True, execute_horizon=EXECUTE, blend="linear", send_prefix=mode == "rtc_guided"
    )
    return PolicyLoop(worker, io, max_wait_s=wait, rtc=rtc), worker


def run(
    mode: str, latency: int, ticks: int, hz: float, seed: int, wallclock: bool = False
) -> dict[str, Any]:
    io = spec_io(hz)
    policy = GaussianFlowPolicy(hz, seed, guided=mode == "rtc_guided")
    loop, worker = make_loop(mode, latency, policy, io, hz, wallclock)
    if wallclock:
        deadline = time.time() + 5.0
        while not worker.connected and time.time() < deadline:
            time.sleep(0.01)
    q = np.asarray(PANDA_HOME, dtype=np.float64)
    rows, firsts, holds, errs = [], [], 0, []
    started = False
    t0 = time.perf_counter()
    late = 0
    for k in range(ticks):
        if wallclock:  # fixed rate on absolute deadlines; a tick that starts late is counted
            lag = t0 + k / hz - time.perf_counter()
            if lag > 0:
                time.sleep(lag)
            elif lag < -0.5 / hz:
                late += 1
        else:
            worker.advance()
        cmd = loop.tick(
            {"state": np.concatenate([q, [0.08]]), "tick": k},
            [RobotReading(q=q.copy(), gripper_width=0.08)],
            float(k) / hz,
        )
        policy_step = cmd is not None and cmd.kind == "policy"
        started = started or policy_step
        if not started:
            continue
        if policy_step:
            rows.append(np.asarray(cmd.action, dtype=np.float64))
            if cmd.first:
                firsts.append(len(rows) - 1)
            q = cmd.joints[0].copy()
        else:  # a hold: the arm stops (zero joint delta)
            holds += 1
            rows.append(np.concatenate([np.zeros(7), [rows[-1][7]]]))
        errs.append(float(np.sqrt(np.mean((q - policy.target(np.array([k + 1.0]))[0]) ** 2))))
    wall = time.perf_counter() - t0
    if wallclock:
        worker.stop()
    steps = np.abs(np.diff(np.asarray(rows)[:, :7], axis=0)).max(1)
    minutes = len(rows) / hz / 60.0
    return {
        "mode": mode,
        "latency_periods": latency,
        "clock": "wall" if wallclock else "tick-exact",
        "late_ticks": late,
        "rtc": mode.startswith("rtc"),
        "ticks": len(rows),
        "chunks": loop.stats.chunks,
        "requests": policy.calls,
        "stalls": holds,
        "stalls_per_min": round(holds / minutes, 1),
        "max_jump_boundary": round(max_jump([r[:7] for r in rows], firsts), 3),
        "max_step_anywhere": round(float(steps.max()), 3),
        "p99_step": round(float(np.percentile(steps, 99)), 3),
        "tracking_rms_rad": round(float(np.mean(errs)), 4),
        "wall_s": round(wall, 1),
        "trace": [round(float(r[0]), 4) for r in rows[:120]],
        "firsts": [f for f in firsts if f < 120],
    }


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for ax, lat in zip(axes, (1, 3)):
        for r in results:
            if r["latency_periods"] == lat and r["clock"] == "tick-exact":
                ax.plot(r["trace"], label=r["mode"], lw=1.2)
        ax.set_title(f"joint 1 action, inference latency {lat} control period(s)")
        ax.set_ylabel("action (normalised)")
        ax.legend(fontsize=8, ncol=4)
    axes[-1].set_xlabel("control tick")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=5.0, help="simulated control time per row")
    ap.add_argument("--hz", type=float, default=10.0, help="control rate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--wallclock-s",
        type=float,
        default=30.0,
        help="seconds per wall-clock row (real inference thread, sleeping policy); 0 = none",
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    ticks = int(args.minutes * 60 * args.hz)
    results = []
    for latency in (1, 3):
        for mode in MODES:
            r = run(mode, latency, ticks, args.hz, args.seed)
            results.append(r)
            print(
                f"latency {latency}  {mode:10s}  stalls/min {r['stalls_per_min']:6.1f}  "
                f"max jump at boundary {r['max_jump_boundary']:.3f}  max step "
                f"{r['max_step_anywhere']:.3f}  "
                f"p99 step {r['p99_step']:.3f}  tracking {r['tracking_rms_rad']:.4f} rad",
                flush=True,
            )
    if args.wallclock_s > 0:
        for latency in (1, 3):
            for mode in ("sync", "rtc_guided"):
                r = run(
                    mode,
                    latency,
                    int(args.wallclock_s * args.hz),
                    args.hz,
                    args.seed,
                    wallclock=True,
                )
                results.append(r)
                print(
                    f"wall-clock latency {latency}  {mode:10s}  stalls/min "
                    f"{r['stalls_per_min']:6.1f}  "
                    f"max jump at boundary {r['max_jump_boundary']:.3f}  late ticks "
                    f"{r['late_ticks']}  "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    load = os.getloadavg()[0]
    meta = machine_meta(
        load_avg_1min=round(load, 2),
        control_hz=args.hz,
        minutes_per_row=args.minutes,
        chunk=H,
        execute_horizon=EXECUTE,
        blend="linear",
        flow_steps=10,
        seed=args.seed,
    )
    rows = [{k: v for k, v in r.items() if k not in ("trace", "firsts")} for r in results]
    write_table(
        "rtc",
        "Real-time chunking in the policy client",
        [
            f"`benchmarks/rtc.py --minutes {args.minutes:g} --hz {args.hz:g}`: the policy "
            "client's loop at "
            f"{args.hz:g} Hz, answers exactly 1 or 3 control periods after each request, a "
            "16-step flow policy "
            "following a moving joint target (smooth random deviation per chunk, std 0.15, length "
            "4 steps). Actions are normalised "
            f"joint deltas ({SCALE} rad per unit); a stall is a tick with nothing to execute (the "
            "arm holds); "
            f"RTC: execute_horizon {EXECUTE}, linear cross-fade; rtc_guided also inpaints the "
            "committed prefix "
            "in the flow sampler (RTC guidance, β = 5). Tick-exact latency: no wall-clock noise "
            f"(1-min load average during the run: {load:.1f}).",
            "Modes: `sync` requests when the chunk is used up (waits); `async` requests `latency` "
            "steps early "
            "and switches naively to the new chunk's first row (stale by the latency); "
            "`rtc_blend` requests after "
            "execute_horizon steps, drops the rows already in the past and cross-fades the "
            "overlap; `rtc_guided` "
            "also sends the committed prefix, which the flow sampler inpaints before the same "
            "cross-fade.",
            "Jumps are max |a_k - a_(k-1)| over the 7 joint dimensions: at the first tick of each "
            "chunk, and "
            "anywhere (a blend must not just move the jump later). A hold counts as a zero joint "
            "delta (the arm "
            "stops). Within a chunk the policy's own steps are ~0.03-0.1: that is the floor. "
            "rtc.png: one "
            "joint's actions over the first 120 ticks.",
            f"`wall` rows ({args.wallclock_s:g} s each): the same loop paced on real time with "
            "the policy client's "
            "inference thread (`InferenceWorker`) and the node's bounded wait (0.6 period) for an "
            "answer; the "
            "policy sleeps so that an answer takes 1 or 3 periods. They are subject to this "
            "shared machine's "
            "scheduling (late ticks: ticks that started more than half a period late).",
        ],
        meta,
        rows,
        [
            ("clock", lambda r: r["clock"]),
            ("latency (periods)", lambda r: r["latency_periods"]),
            ("mode", lambda r: r["mode"]),
            ("stalls / min", lambda r: r["stalls_per_min"]),
            ("max jump at boundary", lambda r: r["max_jump_boundary"]),
            ("max step anywhere", lambda r: r["max_step_anywhere"]),
            ("p99 step", lambda r: r["p99_step"]),
            ("tracking RMS (rad)", lambda r: r["tracking_rms_rad"]),
            ("chunks", lambda r: r["chunks"]),
            ("late ticks", lambda r: r["late_ticks"] if r["clock"] == "wall" else "-"),
        ],
    )
    plot(results, RESULTS / "rtc.png")
    print(f"wrote {RESULTS / 'rtc.md'} (load avg {load:.1f})")


if __name__ == "__main__":
    main()
