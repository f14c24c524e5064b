"""``rlinf collect ENV``: scripted demonstrations from a simulator task into the episode store.

    rlinf collect mujoco_franka/push --episodes 20 --out runs/demos/push --noise 0.1 --only-success

The source is the task's oracle (``sim_bridges.mujoco_franka.oracle_action``) plus Gaussian
action noise (normalised units) for diverse demonstrations; every episode is written step by
step with ``source: demo`` so RLPD / IQL / BC read them from the store (``rlinf_data.store``).
With ``--only-success`` failed episodes are deleted and collection goes on until ``--episodes``
successes (at most ``--max-attempts`` episodes, default 5x).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)
SCRIPTED_FAMILIES = ("mujoco_franka", "franka_language")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "collect", help="record scripted demonstrations (task oracle + noise) to an episode store"
    )
    p.add_argument("env", help="simulator task, e.g. mujoco_franka/push")
    p.add_argument("--episodes", type=int, default=20, help="episodes to keep (default 20)")
    p.add_argument("--out", required=True, help="episode store directory (created or appended to)")
    p.add_argument(
        "--noise", type=float, default=0.0, help="std of Gaussian action noise, normalised units"
    )
    p.add_argument("--only-success", action="store_true", help="keep only successful episodes")
    p.add_argument(
        "--max-attempts", type=int, default=None, help="episode budget with --only-success (5x)"
    )
    p.add_argument("--seed", type=int, default=0, help="env reset seed and noise seed")
    p.add_argument(
        "--obs-mode", default="state", help="state | rgb | state+rgb (images are stored per camera)"
    )
    p.add_argument("options", nargs="*", help="more env options as key=value, e.g. control_hz=10")
    p.set_defaults(run=run)


def _check(args: argparse.Namespace) -> None:
    from rlinf_contracts.config import ConfigError

    family = args.env.partition("/")[0]
    if family not in SCRIPTED_FAMILIES:
        raise ConfigError(
            f"rlinf collect: no scripted source for env family {family!r} (env={args.env!r}); "
            f"scripted families: {', '.join(SCRIPTED_FAMILIES)}"
        )
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    if not 0.0 <= args.noise <= 2.0:
        raise ConfigError(f"--noise must be in [0, 2] (normalised action units), got {args.noise}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")


def _make(make_env: Any, name: str, kwargs: dict[str, Any]) -> Any:
    """The env, or one line naming the bad option: the env's own checks (an unknown option, a
    camera the scene lacks, an obs mode) raise from deep inside its constructor."""
    from rlinf_contracts.config import ConfigError

    try:
        return make_env(name, 1, **kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"env {name!r} with options {kwargs}: {e}") from e


def run(args: argparse.Namespace) -> int:
    # a ROS 2 graph: teleop / HG-DAgger (rlinf_cli/collect_ros.py)
    if args.env.endswith((".yaml", ".yml")):
        from rlinf_cli.collect_ros import run_ros

        return run_ros(args)
    from tqdm import tqdm

    from rlinf_cli.collect_ros import failures_warning
    from rlinf_contracts.config import load_config
    from rlinf_contracts.env_registry import make_env
    from rlinf_data.store import EpisodeStore
    from sim_bridges.mujoco_franka import oracle_action

    _check(args)
    kwargs: dict[str, Any] = load_config(None, args.options) if args.options else {}
    kwargs["obs_mode"] = args.obs_mode
    env = _make(make_env, args.env, kwargs)
    store = EpisodeStore(args.out)
    budget = args.max_attempts or (5 * args.episodes if args.only_success else args.episodes)
    rng = np.random.default_rng(args.seed)
    kept = successes = attempts = 0
    bar = tqdm(total=args.episodes, unit="ep", desc=f"collect {args.env}")
    try:
        obs = env.reset(seed=args.seed)
        while kept < args.episodes and attempts < budget:
            index, ok, obs = _record_episode(env, store, obs, args, rng, oracle_action)
            attempts += 1
            successes += ok
            if args.only_success and not ok:
                store.discard(index)
            else:
                kept += 1
                bar.update(1)
            bar.set_postfix(success=f"{successes / attempts:.2f}", attempts=attempts)
    finally:
        bar.close()
        env.close()
    log.info(
        "collect: %d episodes kept in %s (%d successful); discarded %d failed (%d attempts, "
        "success rate %.2f)",
        kept,
        args.out,
        successes,
        attempts - kept,
        attempts,
        successes / max(attempts, 1),
    )
    warning = failures_warning(kept, successes, args.only_success)
    if warning:
        log.warning("collect: %s", warning)
    if kept < args.episodes:
        log.error(
            "only %d of %d successful episodes within %d attempts; raise --max-attempts or "
            "lower --noise",
            kept,
            args.episodes,
            budget,
        )
        return 1
    return 0


def _record_episode(
    env: Any, store: Any, obs: dict, args: argparse.Namespace, rng: np.random.Generator, oracle: Any
) -> tuple[int, bool, dict]:
    """Run one episode of env row 0 (auto-reset by the env) into ``store``; returns
    (episode index, success, first obs of the next episode)."""
    from rlinf_contracts.episode import EpisodeInfo, Step, StepLayout

    spec = env.spec
    info = EpisodeInfo(
        task=args.env,
        layout=StepLayout(spec.state_dim, spec.action_dim, dict(spec.cameras)),
        robot=spec.robot.to_dict() if spec.robot else None,
        instruction=(obs.get("instruction") or [spec.instruction])[0],  # per-episode ones
        control_hz=spec.control_hz,
        source="demo",
        extra={"scripted": "oracle", "noise": args.noise, "seed": args.seed},
    )
    t0 = time.monotonic()
    with store.begin(info) as w:
        while True:
            action = oracle(env, noise=args.noise, rng=rng)
            nxt, reward, term, trunc, step_info = env.step(action)
            w.append(
                Step(
                    state=obs["state"][0],
                    action=action[0],
                    reward=float(reward[0]),
                    terminated=bool(term[0]),
                    truncated=bool(trunc[0]),
                    timestamp=time.monotonic() - t0,
                    images={c: v[0] for c, v in obs["images"].items()},
                )
            )
            if term[0] or trunc[0]:
                final = step_info["final_observation"]
                ok = bool(step_info["success"][0])
                fin = {
                    "state": final["state"][0],
                    **{f"images/{c}": v[0] for c, v in final["images"].items()},
                }
                return w.end(success=ok, final=fin), ok, nxt
            obs = nxt
