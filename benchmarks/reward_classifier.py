"""Success classifier: held-out accuracy against training time, with the shipped config.

    .venv/bin/python benchmarks/reward_classifier.py              # 36 lift episodes, 3 seeds
    .venv/bin/python benchmarks/reward_classifier.py --seeds 1    # one run

Collects camera-only lift episodes (``rlinf collect mujoco_franka/lift --obs-mode rgb``), trains
``configs/reward_classifier.yaml`` (its ``train.time_budget_s`` included: the figure is what a user
gets from the shipped config on the machine it runs on), and reports validation accuracy,
balanced accuracy, epochs run and wall time per seed, and their medians. The tests check the
classifier learns (all epochs, no clock); the time it takes is measured here. Writes
``benchmarks/results/reward_classifier.{md,json}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_results import machine_meta, write_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--episodes", type=int, default=36, help="lift episodes collected (camera 'third', 64 px)"
    )
    ap.add_argument("--seeds", type=int, default=3, help="training seeds (same frames)")
    args = ap.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    from learner.runners.reward_classifier import RewardClassifierConfig, run
    from rlinf_cli.main import main as cli
    from rlinf_contracts.config import from_dict, load_config

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "frames"
        if (
            cli(
                [
                    "collect",
                    "mujoco_franka/lift",
                    "--episodes",
                    str(args.episodes),
                    "--seed",
                    "1",
                    "--out",
                    str(store),
                    "--obs-mode",
                    "rgb",
                    "cameras=third",
                    "image_size=64",
                ]
            )
            != 0
        ):
            raise SystemExit("frame collection failed")
        for seed in range(args.seeds):
            cfg = from_dict(
                RewardClassifierConfig,
                load_config(
                    ROOT / "configs/reward_classifier.yaml",
                    [
                        f"data.store={store}",
                        f"train.out_dir={Path(tmp) / f'run{seed}'}",
                        f"seed={seed}",
                    ],
                ),
            )
            m = run(cfg, None)
            rows.append(
                {
                    "seed": seed,
                    "val_accuracy": m["val_accuracy"],
                    "val_balanced_accuracy": m["val_balanced_accuracy"],
                    "epochs": m["epochs"],
                    "elapsed_s": round(m["elapsed_s"], 1),
                    "frames": m["frames"],
                    "load_1min": round(os.getloadavg()[0], 1),
                }
            )
            print(
                f"seed {seed}: val accuracy {m['val_accuracy']:.3f} (balanced "
                f"{m['val_balanced_accuracy']:.3f}), "
                f"{m['epochs']} epochs in {m['elapsed_s']:.0f} s",
                flush=True,
            )
    med = {
        k: statistics.median(r[k] for r in rows)
        for k in ("val_accuracy", "val_balanced_accuracy", "elapsed_s")
    }
    print(
        f"median: val accuracy {med['val_accuracy']:.3f}, balanced "
        f"{med['val_balanced_accuracy']:.3f}, "
        f"{med['elapsed_s']:.0f} s"
    )
    write_table(
        "reward_classifier",
        "Success classifier: held-out accuracy and training time",
        [
            f"`configs/reward_classifier.yaml` (its time budget included) on {args.episodes} "
            "camera-only lift "
            "episodes (positives: the last 3 frames of each); validation = held-out episodes. "
            "Median over "
            f"{len(rows)} seeds: val accuracy {med['val_accuracy']:.3f}, balanced "
            f"{med['val_balanced_accuracy']:.3f}, "
            f"{med['elapsed_s']:.0f} s of training. `benchmarks/reward_classifier.py`."
        ],
        machine_meta(episodes=args.episodes, medians=med),
        rows,
        [
            ("seed", lambda r: r["seed"]),
            ("val accuracy", lambda r: f"{r['val_accuracy']:.3f}"),
            ("balanced", lambda r: f"{r['val_balanced_accuracy']:.3f}"),
            ("epochs", lambda r: r["epochs"]),
            ("train s", lambda r: r["elapsed_s"]),
            ("frames", lambda r: r["frames"]),
            ("load", lambda r: r["load_1min"]),
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
