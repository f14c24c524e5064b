"""Policy-server throughput and latency vs. a raw in-process batched forward of the same model.

For each model (the small MLP policy and a ~26 M-parameter wide MLP) and 1 / 8 / 32 concurrent
clients, measures requests/s and client-side p50/p99 round-trip latency against our server with
dynamic batching, and against the same server with ``max_batch=1`` (one request at a time, as
openpi's own server runs: openpi's server package is not installable here, so this mode stands
in for it). The raw forward (``policy.act`` on a batch of N, same torch thread count) is timed in
the same run. Clients are separate processes (closed loop, one request in flight per
connection) so they do not share the server's interpreter lock, but they do share the machine's
cores with the server: on a small machine client-side encoding competes with serving.

    .venv/bin/python benchmarks/policy_server.py [--duration 5] [--torch-threads 1] [--quick]
    .venv/bin/python benchmarks/policy_server.py --from-json   # re-render the .md from the .json

Writes benchmarks/results/policy_server.json and .md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_results import RESULTS, load, provenance, run_command

from policy_server.client import AsyncPolicyClient

STATE_DIM, ACTION_DIM, CHUNK = 32, 7, 8
# name -> (hidden sizes, max_wait_ms). The wait is a per-deployment knob: long enough for a
# closed-loop client population to re-send after a response (~ a third of the forward time).
MODELS = {"mlp": ([256, 256], 2.0), "wide_mlp_26M": ([2560, 2560, 2560], 20.0)}


# -- client processes (no torch) ------------------------------------------------------------------
def _client_proc(
    url: str, conns: int, start_at: float, warmup: float, duration: float, q: Any
) -> None:
    async def one(seed: int) -> list[tuple[float, float]]:
        client = await AsyncPolicyClient.connect(url, timeout_s=120)
        rng = np.random.default_rng(seed)
        obs = {"state": rng.standard_normal(STATE_DIM).astype(np.float32)}
        out: list[tuple[float, float]] = []
        await asyncio.sleep(max(0.0, start_at - time.time()))
        end = start_at + warmup + duration
        while time.time() < end:
            t0 = time.perf_counter()
            await client.infer(obs)
            out.append((time.time(), (time.perf_counter() - t0) * 1000.0))
        await client.close()
        return out

    async def main() -> list[tuple[float, float]]:
        results = await asyncio.gather(*(one(os.getpid() * 100 + i) for i in range(conns)))
        return [r for rs in results for r in rs]

    q.put(asyncio.run(main()))


def drive_clients(url: str, clients: int, warmup: float, duration: float) -> dict[str, float]:
    """Closed-loop load from ``clients`` connections; returns req/s and latency quantiles."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs_n = min(2, clients)
    split = [clients // procs_n + (1 if i < clients % procs_n else 0) for i in range(procs_n)]
    start_at = time.time() + 4.0  # spawned interpreters need a moment to import
    procs = [
        ctx.Process(target=_client_proc, args=(url, n, start_at, warmup, duration, q))
        for n in split
    ]
    for p in procs:
        p.start()
    samples = [
        s for _ in procs for s in q.get(timeout=start_at - time.time() + warmup + duration + 300)
    ]
    for p in procs:
        p.join(30)
    t_lo, t_hi = start_at + warmup, start_at + warmup + duration
    window = [lat for t, lat in samples if t_lo <= t <= t_hi]
    if not window:
        raise RuntimeError(
            f"no requests completed in the measurement window with {clients} clients"
        )
    return {
        "req_per_s": len(window) / duration,
        "p50_ms": float(np.percentile(window, 50)),
        "p99_ms": float(np.percentile(window, 99)),
        "requests": len(window),
    }


# -- server and raw forward (torch) ----------------------------------------------------------------
def raw_forward(policy: Any, batch: int, min_time: float = 1.5) -> dict[str, float]:
    obs = {
        "state": np.random.default_rng(0).standard_normal((batch, STATE_DIM)).astype(np.float32),
        "images": {},
        "instruction": [""] * batch,
    }
    policy.act(obs)
    times: list[float] = []
    t_end = time.perf_counter() + min_time
    while time.perf_counter() < t_end or len(times) < 5:
        t0 = time.perf_counter()
        policy.act(obs)
        times.append((time.perf_counter() - t0) * 1000.0)
    mean = float(np.mean(times))
    return {
        "req_per_s": batch * 1000.0 / mean,
        "mean_ms": mean,
        "p50_ms": float(np.percentile(times, 50)),
        "p99_ms": float(np.percentile(times, 99)),
    }


def serve_and_measure(
    policy: Any, max_batch: int, clients: int, max_wait_ms: float, args: argparse.Namespace
) -> dict[str, float]:
    from learner.serving import TorchPolicy
    from policy_server.background import ServerThread
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer

    cfg = ServerConfig(
        host="127.0.0.1",
        port=0,
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        torch_threads=args.torch_threads,
    )
    served = TorchPolicy(policy, threads=args.torch_threads)
    with ServerThread(PolicyServer(served, cfg, policy_name="bench")) as srv:
        result = drive_clients(srv.url, clients, args.warmup, args.duration)
        m = srv.server.metrics
        result["mean_batch"] = m.batch_sum / max(1, m.batches)
        result["server_forward_ms"] = m.forward_ms_sum / max(
            1, m.batches
        )  # whole run incl. warm-up
    return result


def bench_model(
    name: str, hidden: list[int], max_wait_ms: float, args: argparse.Namespace
) -> dict[str, Any]:
    from learner.models import PolicySpec, build_policy

    policy = build_policy("mlp", PolicySpec(STATE_DIM, ACTION_DIM, CHUNK), hidden=hidden)
    if args.max_wait_ms is not None:
        max_wait_ms = args.max_wait_ms
    out: dict[str, Any] = {
        "hidden": hidden,
        "max_wait_ms": max_wait_ms,
        "params_M": sum(p.numel() for p in policy.parameters()) / 1e6,
        "raw": {},
        "batched": {},
        "one_at_a_time": {},
    }
    for mode, max_batch in (("batched", max(args.clients)), ("one_at_a_time", 1)):
        for n in args.clients:
            if mode == "one_at_a_time" and n == 1:
                continue  # identical to batched with one client
            # raw forward right before and after each server point: a shared machine's speed drifts
            before = raw_forward(policy, n)
            r = serve_and_measure(policy, max_batch, n, max_wait_ms, args)
            after = raw_forward(policy, n)
            raw = {k: (before[k] + after[k]) / 2 for k in before}
            if mode == "batched":
                out["raw"][n] = raw
            r["raw"] = raw
            r["throughput_vs_raw"] = r["req_per_s"] / raw["req_per_s"]
            r["p50_overhead_ms"] = r["p50_ms"] - raw["p50_ms"]
            r["p99_overhead_ms"] = r["p99_ms"] - raw["p99_ms"]
            # share of wall time the server spent inside forwards (1.0 = the model never idles)
            r["forward_duty"] = r["req_per_s"] / r["mean_batch"] * r["server_forward_ms"] / 1000.0
            out[mode][n] = r
            print(
                f"[{name}] {mode:13s} {n:2d} clients: {r['req_per_s']:8.0f} req/s "
                f"({100 * r['throughput_vs_raw']:5.1f}% of raw batch {n} = "
                f"{raw['req_per_s']:.0f}), "
                f"p50 {r['p50_ms']:7.2f} ms, p99 {r['p99_ms']:7.2f} ms "
                f"(+{r['p99_overhead_ms']:.2f} over forward), "
                f"mean batch {r['mean_batch']:.1f}, server forward {r['server_forward_ms']:.1f} ms "
                f"(raw {raw['mean_ms']:.1f}), duty {r['forward_duty']:.2f}",
                flush=True,
            )
    return out


def _fmt_load(load: Any) -> str:
    return "/".join(f"{x:.1f}" for x in load)


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Policy server benchmark",
        "",
        *(
            f"{line}\n"
            for line in provenance(
                {
                    "command": report.get("command"),
                    "machine": report["machine"],
                    "date": report["when"],
                }
            )
        ),
        f"Torch threads {report['torch_threads']}; {report['duration_s']} s "
        f"per point after {report['warmup_s']} s warm-up; clients in 2 separate processes on the "
        "same "
        "machine. `% of raw` = server req/s over raw in-process `policy.act` req/s at batch = "
        "#clients; "
        "`p99 overhead` = client p99 round trip minus raw forward p99 at that batch; `server fwd` "
        "= mean "
        "forward time per batch inside the server (vs raw mean at that batch: CPU shared with "
        "clients); "
        "`fwd duty` = share of wall time the server spent in forwards. Raw figures are the mean "
        "of a "
        "measurement right before and right after each server point. "
        f"Load average (1/5/15 min) before {_fmt_load(report['load_avg_before'])}, after "
        f"{_fmt_load(report['load_avg_after'])}: other jobs share the machine.",
        "",
        "| model | params | wait ms | clients | raw req/s | raw mean/p99 ms | server req/s | % of "
        "raw | "
        "p50 ms | p99 ms | p99 overhead ms | mean batch | server fwd ms | fwd duty | 1-at-a-time "
        "req/s | "
        "1-at-a-time p50/p99 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in report["models"].items():
        for n, r in m["batched"].items():
            raw, single = m["raw"][n], m["one_at_a_time"].get(n)
            s_tput = f"{single['req_per_s']:.0f}" if single else "(same)"
            s_lat = f"{single['p50_ms']:.1f} / {single['p99_ms']:.1f}" if single else "(same)"
            lines.append(
                f"| {name} | {m['params_M']:.2f} M | {m['max_wait_ms']:g} | {n} | "
                f"{raw['req_per_s']:.0f} | "
                f"{raw['mean_ms']:.2f} / {raw['p99_ms']:.2f} | {r['req_per_s']:.0f} | "
                f"{100 * r['throughput_vs_raw']:.1f}% | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                f"{r['p99_overhead_ms']:.2f} | {r['mean_batch']:.1f} | "
                f"{r['server_forward_ms']:.1f} | "
                f"{r['forward_duty']:.2f} | "
                f"{s_tput} | {s_lat} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds per point")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument(
        "--max-wait-ms", type=float, default=None, help="override the per-model batching wait"
    )
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--quick", action="store_true", help="1.5 s points (smoke run)")
    ap.add_argument(
        "--out", default="policy_server", help="results file stem under benchmarks/results"
    )
    ap.add_argument(
        "--from-json", action="store_true", help="only re-render results/<out>.md from its JSON"
    )
    args = ap.parse_args()
    if args.from_json:
        (RESULTS / f"{args.out}.md").write_text(markdown(load(args.out)))
        return
    if args.quick:
        args.duration, args.warmup = 1.5, 0.5
    import torch

    torch.set_num_threads(args.torch_threads)
    report: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": run_command(),
        "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs (shared), "
        f"torch {torch.__version__}",
        "torch_threads": args.torch_threads,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "load_avg_before": os.getloadavg(),
        "models": {name: bench_model(name, *MODELS[name], args) for name in args.models},
    }
    report["load_avg_after"] = os.getloadavg()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=1))
    (RESULTS / f"{args.out}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
