"""Camera-only push's success classifier: how often it calls a miss a success, by what it reads.

    .venv/bin/python benchmarks/reward_classifier_errors.py             # 3 training seeds
    .venv/bin/python benchmarks/reward_classifier_errors.py --seeds 1

Online RL trusts the classifier's success: a frame it wrongly calls success ends an episode with
reward, and the policy learns to produce such frames. This measures that error on episodes no
classifier trained on: the push scene's front camera at 64 px, from the simulator (the twin's
robot node renders the same scene the same way), 40 held-out episodes of a scripted operator with
noise 0.7 on its commands (``rlinf collect mujoco_franka/push --noise 0.7``; mostly near misses).

Four classifiers of ``configs/reward_classifier_push.yaml``, each trained by ``rlinf train``:
the small CNN or the frozen keypoint backbone of the pixel learner (``model.backbone``), each
on the 20 demos alone or with 40 more noisy episodes of another seed (``data.extra_stores``).
Figures per classifier: the frame false-positive rate (frames of failed episodes, and of
successful ones before their last 8, called success), the false-negative rate on a success's
final frame, and the share of failed episodes with a success call -- at threshold 0.5 on one
frame, and at the twin config's reward node setting (threshold 0.6, 3 frames in a row). Needs
the frozen encoder (``rlinf train configs/encoder_pretrain.yaml``; ``--backbone DIR``). Writes
``benchmarks/results/reward_classifier_errors.{md,json}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_results import load_1min, machine_meta, write_table  # noqa: E402

RLINF = str(ROOT / ".venv" / "bin" / "rlinf")
SCENE = ["--obs-mode", "rgb", "control=ee_delta_pos", "cameras=[front,wrist]", "image_size=64"]
# (label, reads the frozen backbone, trains on the noisy episodes too)
VARIANTS = (
    ("CNN, demos", False, False),
    ("CNN, demos + misses", False, True),
    ("keypoints, demos", True, False),
    ("keypoints, demos + misses", True, True),
)
SETTINGS = ((0.5, 1), (0.6, 3))  # (threshold, frames in a row): one frame; the twin's reward node


def rlinf(log: Path, *args: str) -> None:
    with open(log, "ab") as f:
        rc = subprocess.run([RLINF, *args], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise SystemExit(f"rlinf {args[0]} exited {rc}; see {log}")


def collect(work: Path, name: str, episodes: int, seed: int, noise: float) -> Path:
    out = work / name
    if not out.is_dir():
        rlinf(
            work / "collect.log",
            *("collect", "mujoco_franka/push", "--episodes", str(episodes), "--out", str(out)),
            *("--noise", str(noise), "--seed", str(seed), *SCENE),
        )
    return out


def episode_scores(checkpoint: Path, store: Path) -> list[tuple[bool, np.ndarray]]:
    """``(success, p_success per frame, final observation included)`` of each episode."""
    import torch

    from learner.checkpoint import load_policy
    from rlinf_data.demos import open_demos

    model, _ = load_policy(checkpoint)
    out = []
    for ep in open_demos(str(store), key="store", need=["images/front"]).each():
        frames = ep.steps["images/front"]
        if ep.final is not None:
            frames = np.concatenate([frames, ep.final["images/front"][None]])
        obs = {"state": torch.zeros(len(frames), 1), "images": {"front": torch.as_tensor(frames)}}
        with torch.no_grad():
            out.append((bool(ep.info.success), torch.sigmoid(model.logits(obs)).numpy()))
    return out


def errors(scores: list[tuple[bool, np.ndarray]], threshold: float, run: int) -> dict[str, float]:
    fp = neg = fn = wins = fired = fails = 0
    for success, p in scores:
        call = p > threshold
        said = np.convolve(call.astype(int), np.ones(run, int), "valid") >= run
        if success:
            wins += 1
            fn += int(not said[-1]) if len(said) else 1
            fp, neg = fp + int(call[:-8].sum()), neg + len(call[:-8])
        else:
            fails += 1
            fired += int(said.any())
            fp, neg = fp + int(call.sum()), neg + len(call)
    return {
        "frame_fp": fp / max(neg, 1),
        "final_fn": fn / max(wins, 1),
        "failed_called_success": fired / max(fails, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="training seeds per classifier")
    ap.add_argument("--backbone", default="runs/encoder_pretrain_front", help="frozen encoder")
    ap.add_argument("--work", default="runs/bench_reward_classifier_errors")
    args = ap.parse_args(argv)
    if not (ROOT / args.backbone).exists():
        ap.error(
            f"--backbone {args.backbone} does not exist: rlinf train configs/encoder_pretrain.yaml "
            f"train.out_dir={args.backbone}"
        )
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    work = (ROOT / args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    demos = collect(work, "demos", 20, 0, 0.1)
    misses = collect(work, "misses", 40, 3, 0.7)
    heldout = collect(work, "heldout", 40, 7, 0.7)
    rows: list[dict[str, Any]] = []
    for label, keypoints, with_misses in VARIANTS:
        per_seed = []
        for seed in range(args.seeds):
            out = work / f"{label.replace(' ', '').replace(',', '_').replace('+', '')}_{seed}"
            rlinf(
                work / "train.log",
                *("train", "configs/reward_classifier_push.yaml", f"seed={seed}"),
                *(f"data.store={demos}", "data.camera=front", f"train.out_dir={out}"),
                f"data.extra_stores=[{misses}]" if with_misses else "data.extra_stores=[]",
                f"model.backbone={ROOT / args.backbone}" if keypoints else "model.backbone=",
                "train.time_budget_s=900",  # every epoch: the figure is the classifier's
            )
            found = episode_scores(out, heldout)
            per_seed.append({f"{t}/{k}": errors(found, t, k) for t, k in SETTINGS})
            print(f"{label}, seed {seed}: {per_seed[-1]}", flush=True)
        row: dict[str, Any] = {"classifier": label, "seeds": args.seeds, "load_1min": load_1min()}
        for t, k in SETTINGS:
            for key in ("frame_fp", "final_fn", "failed_called_success"):
                vals = [s[f"{t}/{k}"][key] for s in per_seed]
                row[f"{key}@{t}x{k}"] = [statistics.median(vals), min(vals), max(vals)]
        rows.append(row)

    def cell(key: str):
        return lambda r: "{:.3f} [{:.3f}, {:.3f}]".format(*r[key])

    write_table(
        "reward_classifier_errors",
        "Camera-only push: the success classifier's errors on held-out near misses",
        [
            "Held-out: 40 push episodes of a scripted operator with noise 0.7 on its commands "
            "(seed 7; no classifier trained on them), front camera, 64 px. Training: the 20 "
            "demos (noise 0.1) alone, or with 40 noisy episodes of seed 3 "
            "(`data.extra_stores`); the small CNN (`model.backbone=`) or the pixel learner's "
            "frozen keypoint backbone (`model.backbone`), each by `rlinf train "
            "configs/reward_classifier_push.yaml` with every epoch run. Cells: median [min, "
            f"max] over {args.seeds} training seeds. `frame FP`: frames of failed episodes (and "
            "of successes before their last 8) called success; `final FN`: a success's final "
            "frame not called success; `failed called success`: failed episodes with a success "
            "call, what online RL is rewarded for. `@0.6x3`: threshold 0.6 on 3 frames in a row "
            "(the twin config's reward node).",
        ],
        machine_meta(seeds=args.seeds, backbone=args.backbone),
        rows,
        [
            ("classifier", lambda r: r["classifier"]),
            ("frame FP @0.5", cell("frame_fp@0.5x1")),
            ("final FN @0.5", cell("final_fn@0.5x1")),
            ("failed called success @0.5", cell("failed_called_success@0.5x1")),
            ("failed called success @0.6x3", cell("failed_called_success@0.6x3")),
            ("final FN @0.6x3", cell("final_fn@0.6x3")),
            ("load", lambda r: r["load_1min"]),
        ],
    )
    print((ROOT / "benchmarks/results/reward_classifier_errors.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
