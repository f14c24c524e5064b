"""Held-out scoring of an online twin run (``ros_online_rlpd.py``): each checkpoint the learner
wrote, on the simulator of the same task, after the run so the evaluation takes no CPU from it,
and the run's verdict figures (first checkpoint at the target, the best).

Why the simulator: the twin's scene and physics are the simulator's, so its seeds the twin never
used are held-out episodes of the same task, scored by the task's own judge.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from online_rig import TOKENS

ROOT = Path(__file__).resolve().parents[1]


def sim_task(learner: str) -> str:
    """The simulator task the held-out episodes run: the learner's env, with its obs mode and
    cameras when it sees pixels."""
    env = yaml.safe_load((ROOT / learner).read_text())["env"]
    cams = env.get("kwargs", {}).get("cameras")
    mode = env.get("obs_mode", "state")
    return env["name"] + (f", obs_mode={mode} cameras={cams}" if mode != "state" else "")


def checkpoints(work: Path, t_robot: float) -> list[tuple[float, Path]]:
    """``(wall s since the robot started, path)`` of ``initial`` and each checkpoint, in order."""
    out = work / "run"
    return [(0.0, out / "initial")] + sorted(
        (max(0.0, (p / "meta.json").stat().st_mtime - t_robot), p)
        for p in (out / "checkpoints").glob("iter_*")
    )


def heldout(
    learner: str,
    ckpts: list[tuple[float, Path]],
    episodes: int,
    overrides: list[str],
    sampled: bool = False,
) -> list[dict]:
    """Held-out success of each checkpoint on the simulator: the deterministic actor, and with
    ``sampled`` also its sampled actions (``eval.deterministic=false``, seeded): the policy the
    twin ran, since the server serves it with ``server.deterministic=false``."""
    from learner.checkpoint import load_policy
    from learner.eval.embodied import evaluate_config
    from learner.offpolicy.config import OffPolicyConfig
    from rlinf_contracts.config import from_dict, load_config

    for k, v in TOKENS.items():
        os.environ.setdefault(k, v)
    cfg = from_dict(OffPolicyConfig, load_config(str(ROOT / learner), ["push.url=", *overrides]))
    cfg.train.progress = False
    modes = {"heldout_success": True, **({"heldout_sampled": False} if sampled else {})}
    rows = []
    for wall, path in ckpts:
        policy, meta = load_policy(str(path))
        counters = meta.get("counters", {}) if isinstance(meta, dict) else {}
        row: dict = {
            "checkpoint": path.name,
            "wall_s": round(wall, 1),
            "transitions": int(counters.get("env_steps", 0)),
            "updates": int(counters.get("updates", 0)),
        }
        for key, deterministic in modes.items():
            cfg.eval.deterministic = deterministic
            res = evaluate_config(
                policy, cfg, episodes, seed=50_000, video_path=None, deadline=None, progress=False
            )
            split = next(iter(res.values()))
            row[key] = round(float(split["success_rate"]), 3)
            row["episodes"] = int(split["episodes"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def first_at(rows: list[dict], key: str, target: float, minutes: float) -> dict | None:
    """The first checkpoint whose ``key`` reaches ``target`` within the run's minutes."""
    return next((r for r in rows if r[key] >= target and r["wall_s"] <= minutes * 60), None)


def judge(meta: dict, rows: list[dict], sampled: bool) -> None:
    """The run's verdict figures into ``meta``: first checkpoint at the target, the best."""
    hit = first_at(rows, "heldout_success", meta["target"], meta["minutes"])
    meta["first_at_target_s"] = hit["wall_s"] if hit else None
    meta["best"] = max(rows, key=lambda r: r["heldout_success"])
    if sampled:
        hit = first_at(rows, "heldout_sampled", meta["target"], meta["minutes"])
        meta["first_at_target_sampled_s"] = hit["wall_s"] if hit else None
        meta["best_sampled"] = max(rows, key=lambda r: r["heldout_sampled"])
