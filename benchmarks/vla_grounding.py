"""Where the small VLA fails in distribution: success per verb and per instruction kind (names a
shape / colour only), and how often the slot pointer picks the named object, per checkpoint.

    .venv/bin/python benchmarks/vla_grounding.py          # the OOD table's flow checkpoints
    .venv/bin/python benchmarks/vla_grounding.py sft=runs/x ppo=runs/y --episodes 192

Why this exists: the OOD table's ID success is one number over a mix of verbs and two kinds of
instruction; whether RL has anything to convert depends on which cell fails. Deterministic
actions, ID split, the same seeds for every checkpoint. Writes
``benchmarks/results/vla_grounding.{md,json}``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_results import labelled_paths, machine_meta, write_table  # noqa: E402

DEFAULT = (
    "sft=runs/bench_vla_ood/flow_sft",
    "ppo=runs/bench_vla_ood/flow_ppo",
    "grpo=runs/bench_vla_ood/flow_grpo",
)  # the flow checkpoints of vla_ood.py's default --work
CELLS = [(v, k) for v in ("reach", "push", "lift") for k in ("named", "colour")]


def diagnose(path: str, episodes: int, num_envs: int = 16) -> dict[str, Any]:
    """Roll the checkpoint deterministically on ID seeds; tally success and pointer choices."""
    import numpy as np

    from learner.checkpoint import load_policy
    from learner.eval.embodied import checkpoint_config, split_kwargs
    from learner.models import obs_to_tensors
    from learner.rollout.envs import build_env

    policy, meta = load_policy(path)
    cfg = checkpoint_config(meta)
    env = build_env(cfg.eval.env or cfg.env.name, num_envs, **split_kwargs(cfg, "id"))
    tally: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    picks: dict[str, list[float]] = collections.defaultdict(list)
    has_pointer = getattr(policy, "pointer", None) is not None
    try:
        for r in range((episodes + num_envs - 1) // num_envs):
            obs = env.reset(9_000_000 + r * num_envs)
            eps = [env.task.episode(d) for d in env.datas]
            kinds = ["colour" if "object" in e.instruction.split() else "named" for e in eps]
            if has_pointer:
                w = policy.slot_weights(obs_to_tensors(obs)).argmax(-1).numpy()
                for e, k, c in zip(eps, kinds, w):
                    picks[k].append(float(c == e.target))
            alive, success = np.ones(num_envs, bool), np.zeros(num_envs, bool)
            for _ in range(4 * env.spec.max_episode_steps):
                a = np.asarray(policy.act(obs, deterministic=True)[0])[..., : env.spec.action_dim]
                obs, _, term, trunc, info = env.step(a)
                ended = alive & (np.asarray(term) | np.asarray(trunc))
                success[ended] = np.asarray(info["success"])[ended]
                alive &= ~ended
                if not alive.any():
                    break
            for e, k, s in zip(eps, kinds, success):
                tally[(e.verb, k)].append(float(s))
    finally:
        env.close()
    cells = {
        f"{v}/{k}": (
            sum(tally[(v, k)]) / len(tally[(v, k)]) if tally[(v, k)] else None,
            len(tally[(v, k)]),
        )
        for v, k in CELLS
    }
    everything = [s for xs in tally.values() for s in xs]
    return {
        "checkpoint": path,
        "id": sum(everything) / len(everything),
        "episodes": len(everything),
        "cells": cells,
        "pointer": {k: sum(v) / len(v) for k, v in picks.items()},
    }


def _fmt(cell: tuple[float | None, int]) -> str:
    rate, n = cell
    return "-" if rate is None else f"{rate:.2f} ({n})"


def _cell_column(key: str) -> tuple[str, Any]:
    return key.replace("/", " "), lambda r: _fmt(r["cells"][key])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "checkpoints", nargs="*", default=list(DEFAULT), help="label=run_dir_or_checkpoint ..."
    )
    ap.add_argument("--episodes", type=int, default=192, help="ID episodes per checkpoint")
    args = ap.parse_args(argv)
    rows = []
    for label, path in labelled_paths(ap, args.checkpoints):
        t0 = time.perf_counter()
        row = {
            "label": label,
            **diagnose(path, args.episodes),
            "wall_s": round(time.perf_counter() - t0, 1),
        }
        rows.append(row)
        print(
            label,
            f"ID {row['id']:.2f}",
            " ".join(f"{c}={_fmt(v)}" for c, v in row["cells"].items()),
            "pointer right:",
            {k: round(v, 2) for k, v in row["pointer"].items()},
            flush=True,
        )
    columns = [("checkpoint", lambda r: r["label"]), ("ID", lambda r: f"{r['id']:.2f}")]
    columns += [_cell_column(f"{v}/{k}") for v, k in CELLS]
    columns += [
        (
            "pointer right (named / colour-only)",
            lambda r: " / ".join(
                f"{r['pointer'].get(k, float('nan')):.2f}" for k in ("named", "colour")
            ),
        )
    ]
    write_table(
        "vla_grounding",
        "VLA in distribution: success per verb and instruction kind",
        [
            f"Deterministic actions on {args.episodes} ID episodes per checkpoint (same seeds); "
            "cells are "
            "success (episodes). 'colour' = the instruction names the object by colour only ('the "
            "red "
            "object'), 'named' = by colour and shape; 'pointer right' = the slot pointer's "
            "likeliest slot is "
            "the named object at the first step (chance with 3 objects: 0.33). "
            "`benchmarks/vla_grounding.py`."
        ],
        machine_meta(episodes=args.episodes),
        rows,
        columns,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
