"""How much of the push scene a frozen pixel encoder's features hold: probes, in centimetres.

A camera-only push policy can only be as good as what its frozen features say about where the
cube and the goal are. A 20-minute RL run per candidate encoder is a slow way to find out, so
this fits small probes on the features instead: frames of the push simulator under a noisy
oracle (the hand, the cube and the goal all move), the frozen backbone's features of both
cameras plus the proprioception as input, and the scene's true state (``true_state()``, which the
policy never sees) as the target. It reports the held-out error of a ridge (linear) probe and
of a two-layer MLP probe for the cube's position, the cube relative to the hand, and the goal
relative to the cube (what the push needs), each beside the error of always guessing the mean.

``random`` is the same backbone with its initial weights: the floor any pretraining must beat.

    python benchmarks/encoder_probe.py LABEL=WEIGHTS [...] [random] [--frames 8000]

``WEIGHTS`` is anything ``model.encoder.weights`` takes (a pretraining run directory, a
checkpoint, a ``.safetensors`` file). Writes ``benchmarks/results/encoder_probe.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_results import labelled_paths, load_1min, machine_meta, write_table  # noqa: E402

ROBOT_STATE_DIM = 24
TARGETS = {
    "cube": slice(24, 26),
    "goal": slice(30, 32),
    "cube - hand": slice(27, 30),
    "goal - cube": slice(33, 35),
}
CAMERAS = ("front", "wrist")
NUM_ENVS = 8


@dataclass
class Frames:
    images: dict[str, np.ndarray]  # camera -> uint8 [N, H, W, 3]
    proprio: np.ndarray  # [N, 24]
    truth: np.ndarray  # [N, state_dim], the scene's true state


def collect(
    frames: int, seed: int, noise: float, image_size: int, episode_steps: int | None = None
) -> Frames:
    """``frames`` observations of the push simulator under the oracle with ``noise``.

    ``episode_steps`` cuts episodes short: a new cube and goal every that many steps, so a probe
    of the goal sees hundreds of placements instead of the ~100 of full-length episodes.
    """
    from learner.rollout.envs import build_env
    from sim_bridges.mujoco_franka.oracle import oracle_action
    from sim_bridges.mujoco_franka.vector_env import FrankaVectorEnv

    env = build_env(
        "mujoco_franka/push",
        NUM_ENVS,
        obs_mode="rgb",
        control="ee_delta_pos",
        cameras=list(CAMERAS),
        image_size=image_size,
        **({} if episode_steps is None else {"max_episode_steps": episode_steps}),
    )
    assert isinstance(env, FrankaVectorEnv)  # the push family's own vector env
    rng = np.random.default_rng(seed)
    images: dict[str, list[np.ndarray]] = {c: [] for c in CAMERAS}
    proprio, truth = [], []
    try:
        obs = env.reset(seed)
        for _ in range(max(1, frames // NUM_ENVS)):
            for c in CAMERAS:
                images[c].append(obs["images"][c].copy())
            proprio.append(obs["state"][:, :ROBOT_STATE_DIM].copy())
            truth.append(env.true_state())
            obs, *_ = env.step(oracle_action(env, noise=noise, rng=rng))
    finally:
        env.close()
    return Frames(
        {c: np.concatenate(v) for c, v in images.items()},
        np.concatenate(proprio),
        np.concatenate(truth),
    )


@torch.no_grad()
def features(weights: str | None, data: Frames) -> np.ndarray:
    """``[N, F]``: the backbone's features of every camera, then the proprioception."""
    from learner.models.encoder_kinds import KeypointBackbone, load_weights, to_unit

    torch.manual_seed(0)
    backbone = KeypointBackbone()
    if weights is not None:
        load_weights(backbone, weights)
    backbone.eval()
    cols = []
    for c in CAMERAS:
        imgs = torch.as_tensor(data.images[c])
        cols.append(
            torch.cat([backbone(to_unit(imgs[i : i + 256])) for i in range(0, len(imgs), 256)])
        )
    return np.concatenate([torch.cat(cols, 1).numpy(), data.proprio], 1)


def _standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = train.mean(0), train.std(0) + 1e-6
    return (train - mu) / sd, (test - mu) / sd


def ridge_probe(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, lam: float = 1e-2) -> np.ndarray:
    """A linear probe (ridge on standardised features, bias unpenalised-ish)."""
    a, b = _standardise(x, x_test)
    a, b = np.c_[a, np.ones(len(a))], np.c_[b, np.ones(len(b))]
    w = np.linalg.solve(a.T @ a + lam * len(a) * np.eye(a.shape[1]), a.T @ y)
    return b @ w


def mlp_probe(
    x: np.ndarray, y: np.ndarray, x_test: np.ndarray, updates: int = 3000, seed: int = 0
) -> np.ndarray:
    """A 256x256 ReLU MLP probe (Adam, weight decay): what the critic's own MLP could read."""
    torch.manual_seed(seed)
    a, b = (torch.as_tensor(v, dtype=torch.float32) for v in _standardise(x, x_test))
    target = torch.as_tensor(y, dtype=torch.float32)
    net = torch.nn.Sequential(
        torch.nn.Linear(a.shape[1], 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, y.shape[1]),
    )
    opt = torch.optim.Adam(net.parameters(), 1e-3, weight_decay=1e-4)
    for _ in range(updates):
        i = torch.randint(0, len(a), (256,))
        loss = (net(a[i]) - target[i]).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return net(b).numpy()


def rmse_cm(pred: np.ndarray, truth: np.ndarray) -> float:
    """Root-mean-square Euclidean error, in cm.

    >>> rmse_cm(np.array([[0.03, 0.04]]), np.zeros((1, 2)))
    5.0
    """
    return float(np.sqrt(np.square(pred - truth).sum(1).mean()) * 100)


def probe(label: str, weights: str | None, train: Frames, test: Frames) -> dict[str, Any]:
    x, x_test = features(weights, train), features(weights, test)
    row: dict[str, Any] = {"encoder": label, "weights": weights or "initial (random)"}
    for name, cols in TARGETS.items():
        y, y_test = train.truth[:, cols], test.truth[:, cols]
        row[f"{name} / mean"] = rmse_cm(np.broadcast_to(y.mean(0), y_test.shape), y_test)
        row[f"{name} / linear"] = rmse_cm(ridge_probe(x, y, x_test), y_test)
        row[f"{name} / mlp"] = rmse_cm(mlp_probe(x, y, x_test), y_test)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="probe frozen pixel encoders on the push scene")
    ap.add_argument("encoders", nargs="+", help="LABEL=weights, or 'random' (initial weights)")
    ap.add_argument("--frames", type=int, default=8000, help="training frames (test: a fifth)")
    ap.add_argument("--noise", type=float, default=0.8, help="the oracle's action noise")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument(
        "--episode-steps",
        type=int,
        default=None,
        help="cut episodes at this many steps (more goal placements; default: the task's)",
    )
    args = ap.parse_args(argv)
    named = [e for e in args.encoders if e != "random"]
    encoders: list[tuple[str, str | None]] = list(labelled_paths(ap, named))
    if "random" in args.encoders:
        encoders.append(("random", None))
    train = collect(args.frames, 0, args.noise, args.image_size, args.episode_steps)
    test = collect(args.frames // 5, 10_000, args.noise, args.image_size, args.episode_steps)
    rows = []
    for label, weights in encoders:
        rows.append(probe(label, weights, train, test))
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in rows[-1].items()})
    episode_note = (
        "" if args.episode_steps is None else f", episodes cut at {args.episode_steps} steps"
    )
    columns = [("encoder", lambda r: r["encoder"])]
    for name in TARGETS:
        for kind in ("linear", "mlp", "mean"):
            columns.append((f"{name}, {kind} (cm)", lambda r, k=f"{name} / {kind}": f"{r[k]:.2f}"))
    write_table(
        "encoder_probe",
        "Push: what frozen pixel features say about the scene (probe error, cm)",
        [
            f"Probes fitted on {len(train.proprio)} frames of the push simulator "
            f"({args.image_size} px, cameras {', '.join(CAMERAS)}, oracle with action noise "
            f"{args.noise}{episode_note}), scored on {len(test.proprio)} frames of other "
            "episodes against the scene's true state. Input: the frozen backbone's features of "
            "both cameras plus the proprioception. 'mean' is the error of always guessing the "
            f"training mean. 1-min load {load_1min()}."
        ],
        machine_meta(),
        rows,
        columns,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
