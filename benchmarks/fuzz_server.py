"""Fuzz a live ``rlinf serve`` process: 10,000 malformed frames, then 4 clients that flood large
frames without reading replies; server RSS before, during and after.

Pass criteria: 0 crashes (a close other than 1009 for an oversized frame), 0 hangs
(no reply within 10 s), 0 replies that are not a clear ``bad request: ...`` text of at most
1 KiB or an action response; the server still answers a good request at the end. The frame
generator is ``tests/policy_server/fuzz_frames.py`` (the same one ``make test`` runs 2,000 of).

    .venv/bin/python benchmarks/fuzz_server.py [--frames 10000] [--seed 0]

Writes benchmarks/results/fuzz_server.json and .md.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "policy_server"), str(Path(__file__).parent)]

from bench_results import machine_meta, write_table  # noqa: E402
from fuzz_frames import fuzz_server, valid_request  # noqa: E402

from policy_server.client import PolicyClient, open_sync  # noqa: E402
from rlinf_contracts import wire  # noqa: E402

SERVE_YAML = (
    "policy:\n  name: mlp\n  spec: {state_dim: 4, action_dim: 2, chunk: 3}\n"
    "  kwargs: {hidden: [64, 64]}\n"
)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def start_server(port: int) -> subprocess.Popen:
    cfg = Path(tempfile.mkdtemp()) / "serve.yaml"
    cfg.write_text(SERVE_YAML)
    cmd = [
        sys.executable,
        "-m",
        "rlinf_cli.main",
        "serve",
        "--config",
        str(cfg),
        "--port",
        str(port),
        "server.torch_threads=1",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
            return proc
        except OSError as e:
            if proc.poll() is not None:
                raise RuntimeError("rlinf serve exited during start-up") from e
            time.sleep(0.3)
    raise TimeoutError("rlinf serve did not come up in 120 s")


def non_readers(url: str, clients: int, seconds: float, pid: int) -> dict[str, float]:
    """``clients`` connections each sending ~7.5 MB frames and never reading; peak server RSS."""
    frame = wire.packb({"k" * 7_500_000: 1})
    sent, stop = [0], threading.Event()

    def flood() -> None:
        try:
            ws = open_sync(url, max_size=None, compression=None)
            while not stop.is_set():
                ws.send(frame)
                sent[0] += 1
        except Exception:
            pass

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    peak, end = 0.0, time.time() + seconds
    while time.time() < end:
        peak = max(peak, rss_mb(pid))
        time.sleep(0.1)
    stop.set()
    return {"frames_sent": sent[0], "peak_rss_mb": peak}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flood-seconds", type=float, default=10.0)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = start_server(port)
    url = f"ws://127.0.0.1:{port}"
    try:
        with PolicyClient(url) as c:
            c.infer(wire.unpackb(valid_request(np.random.default_rng(0))))
        rss_before = rss_mb(proc.pid)
        bar = tqdm(total=args.frames, desc="fuzz frames", unit="frame")
        report = fuzz_server(
            url, args.frames, seed=args.seed, timeout_s=10.0, progress=lambda i: bar.update()
        )
        bar.close()
        rss_after_fuzz = rss_mb(proc.pid)
        flood = non_readers(url, 4, args.flood_seconds, proc.pid)
        time.sleep(1.0)
        rss_after = rss_mb(proc.pid)
        with PolicyClient(url, retries=3) as c:
            still_serves = c.infer(wire.unpackb(valid_request(np.random.default_rng(1))))[
                "actions"
            ].shape == (3, 2)
    finally:
        proc.terminate()
        proc.wait(30)
    hangs = sum("hang" in f for f in report.failures)
    crashes = sum("crash" in f for f in report.failures)
    row = {
        "frames": report.frames,
        "seconds": round(report.seconds, 1),
        "crashes": crashes,
        "hangs": hangs,
        "unclear_replies": len(report.failures) - hangs - crashes,
        "bad_request": report.outcomes["bad_request"],
        "actions": report.outcomes["actions"],
        "closed_1009": report.outcomes["closed_1009"],
        "rss_before_mb": round(rss_before, 1),
        "rss_after_fuzz_mb": round(rss_after_fuzz, 1),
        "flood_frames_sent": flood["frames_sent"],
        "flood_peak_rss_mb": round(flood["peak_rss_mb"], 1),
        "rss_after_mb": round(rss_after, 1),
        "still_serves": still_serves,
        "failures": report.failures[:20],
    }
    cols = [(k, lambda r, k=k: r[k]) for k in row if k != "failures"]
    write_table(
        "fuzz_server",
        "Policy server under fuzzing (live `rlinf serve` process)",
        [
            f"{args.frames} fuzzed frames over one connection (seed {args.seed}), then 4 clients "
            "sending ~7.5 MB "
            f"frames without reading replies for {args.flood_seconds:g} s. RSS is the server "
            "process's VmRSS.",
        ],
        machine_meta(),
        [row],
        cols,
    )
    print({k: v for k, v in row.items() if k != "failures"})
    return 0 if report.ok and still_serves else 1


if __name__ == "__main__":
    sys.exit(main())
