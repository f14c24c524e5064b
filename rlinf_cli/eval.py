"""``rlinf eval``: success rate of a checkpoint in simulation, or of a running policy server.

- ``rlinf eval CHECKPOINT [--episodes K] [--ood pose,vision]`` evaluates a learner checkpoint
  on held-out seeds (embodied: success per OOD split + an mp4; LLM: accuracy on a dataset).
- ``rlinf eval --policy-server ws://HOST:PORT CONFIG`` streams a sim env's observations to a
  running policy server and executes the returned chunks: the path a real robot uses.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a checkpoint, or a running policy server, in simulation")
    p.add_argument("target", help="checkpoint directory, or (with --policy-server) a YAML config naming the env")
    p.add_argument("overrides", nargs="*", help="key=value overrides of the checkpoint's / config's settings")
    p.add_argument("--policy-server", metavar="URL", default=None, help="ws://HOST:PORT of a running policy server")
    p.add_argument("--episodes", type=int, default=None, help="episodes per split (default: the config's eval.episodes)")
    p.add_argument("--seed", type=int, default=None, help="first held-out seed (default: the config's)")
    p.add_argument("--ood", default=None, help="comma-separated OOD splits, e.g. id,pose,vision,semantic")
    p.add_argument("--video", default=None, help="mp4 path for a few episodes (default: next to the checkpoint)")
    p.add_argument("--dataset", default=None, help="LLM checkpoints: jsonl/parquet dataset to score")
    p.set_defaults(run=run)


def _print(result: dict) -> None:
    print(json.dumps(result, indent=2, default=str))


def run(args: argparse.Namespace) -> int:
    if args.episodes is not None and args.episodes < 1:
        raise SystemExit("rlinf eval: --episodes must be >= 1")
    if args.policy_server:
        return _eval_server(args)
    meta = _checkpoint_meta(Path(args.target))
    if meta.get("runner") == "reasoning":
        from learner.eval.llm import evaluate_llm_checkpoint

        _print(evaluate_llm_checkpoint(str(meta["_dir"]), dataset=args.dataset, episodes=args.episodes))
        return 0
    from rlinf_contracts.config import parse_overrides
    from learner.eval.embodied import evaluate_checkpoint

    splits = args.ood.split(",") if args.ood else None
    _print(evaluate_checkpoint(str(meta["_dir"]), episodes=args.episodes, seed=args.seed, ood_splits=splits,
                               video_path=args.video, overrides=parse_overrides(args.overrides)))
    return 0


def _checkpoint_meta(path: Path) -> dict:
    """meta.json of the checkpoint ``path`` points at: a checkpoint dir, a run's out_dir or its
    checkpoints/ dir (latest iteration), or an LLM run's checkpoint/ dir."""
    for cand in (path, path / "checkpoint"):
        if (cand / "meta.json").is_file():
            return {**json.loads((cand / "meta.json").read_text()), "_dir": cand}
    from learner.checkpoint import resolve_checkpoint

    found = resolve_checkpoint(path)  # raises FileNotFoundError with the layouts it accepts
    return {**json.loads((found / "meta.json").read_text()), "_dir": found}


def _eval_server(args: argparse.Namespace) -> int:
    from rlinf_contracts.config import from_dict, load_config
    from learner.runners.config import EnvConfig, EvalConfig
    from policy_server.sim_eval import run_sim_eval

    cfg = load_config(args.target, args.overrides)
    env = from_dict(EnvConfig, cfg.get("env") or {}, path="env")
    eval_cfg = from_dict(EvalConfig, cfg.get("eval") or {}, path="eval")
    episodes = args.episodes or eval_cfg.episodes
    seed = args.seed if args.seed is not None else eval_cfg.seed_offset
    _print(run_sim_eval(args.policy_server, env.name, env.factory_kwargs(), episodes, seed))
    return 0
