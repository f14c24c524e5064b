"""What each frozen-encoder backbone costs per frame on a CPU core, and what it caches.

    taskset -c 1 .venv/bin/python benchmarks/backbone_cost.py [--sizes 64 128] [--repeats 3]

For every entry of ``model.encoder.backbone`` (random weights: the cost does not depend on
them), two cameras, the work the learner does when a frame enters the feature replay: the
backbone on the frame and ``cached_views - 1`` shifted copies (4 views and 1 view; the shipped
configs cache 2), a batch of 8 frames (one vector-env step). Torch on one thread. Reports CPU ms
per frame (median of the repeats), features per camera and the replay's float32 size per 100k
frames. Writes ``benchmarks/results/backbone_cost.{json,md}``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_results import load_1min, machine_meta, write_table  # noqa: E402

FRAMES = 8  # one step of the shipped 8-env worker
CAMERAS = 2


def cost(backbone: str, side: int, views: int, repeats: int) -> float:
    """CPU ms per frame of ``FrozenEncoder.cached_views`` (median over ``repeats``)."""
    from learner.models.encoder_kinds import FrozenEncoder, feature_rng

    enc = FrozenEncoder(CAMERAS, (side, side), out_dim=50, backbone=backbone).eval()
    gen = feature_rng(0)
    imgs = [torch.randint(0, 256, (FRAMES, side, side, 3), dtype=torch.uint8)] * CAMERAS
    enc.cached_views(imgs, views, 4, gen)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        enc.cached_views(imgs, views, 4, gen)
        times.append((time.process_time() - t0) * 1000 / FRAMES)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    from learner.models.encoder_kinds import BACKBONES, FrozenEncoder

    ap = argparse.ArgumentParser(description="CPU cost per frame of each frozen backbone")
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128], help="image sides (px)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backbones", nargs="+", default=None, help="default: every entry")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    names = args.backbones or [n for n in BACKBONES.names() if not n.endswith("_reg")]
    load_start = load_1min()
    rows = []
    for name in names:
        for side in args.sizes:
            dim = FrozenEncoder(1, (side, side), out_dim=8, backbone=name).feature_dim
            row = {
                "backbone": name,
                "px": side,
                "features": dim,
                "ms_4": cost(name, side, 4, args.repeats),
                "ms_1": cost(name, side, 1, args.repeats),
                "mb_100k": 100_000 * 4 * CAMERAS * dim * 4 / 1e6,
            }
            rows.append(row)
            print({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()})
    write_table(
        "backbone_cost",
        "Frozen-encoder backbones: CPU cost per frame and replay size",
        [
            f"Two cameras, a batch of {FRAMES} frames (one step of an 8-env worker), torch on one "
            "thread, random weights; CPU ms per frame of the backbone on the frame and its "
            "shifted views as the feature replay computes them (median of "
            f"{args.repeats}). Replay size: float32 features of 4 views x {CAMERAS} cameras per "
            f"frame. 1-min load {load_start} at start, {load_1min()} at end. The shipped "
            "camera-only configs use keypoints at 64 px (the env worker renders a frame in "
            "about as long as the learner spends on it); the released networks are a GPU's, "
            "or set model.encoder.cached_views: 1.",
        ],
        machine_meta(),
        rows,
        [
            ("backbone (model.encoder.backbone)", lambda r: r["backbone"]),
            ("image px", lambda r: r["px"]),
            ("features per camera", lambda r: r["features"]),
            ("CPU ms per frame, 4 views", lambda r: f"{r['ms_4']:.1f}"),
            ("CPU ms per frame, 1 view", lambda r: f"{r['ms_1']:.1f}"),
            ("replay MB per 100k frames (4 views)", lambda r: f"{r['mb_100k']:,.0f}"),
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
