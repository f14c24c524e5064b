"""``rlinf eval``: success rate of a checkpoint in simulation, or of a running policy server.

- ``rlinf eval RUN_OR_CHECKPOINT [--episodes K] [--ood pose,vision] [--out DIR]`` (or
  ``--checkpoint RUN_OR_CHECKPOINT``) evaluates a learner checkpoint of any runner on held-out
  seeds (embodied -- PPO / GRPO, off-policy, offline, VLA SFT: success per OOD split + an mp4;
  LLM reasoning / agentic: accuracy on a dataset; reward classifier: accuracy on its held-out
  episodes). Results (``results.json``) and the video go to ``--out``, by default
  ``<run>/evals/<checkpoint>_seed<S>/``: never into the checkpoint, which stays as trained.
  The video only with ``--video [PATH]``: rendering costs ten times the episodes themselves.
  The run's robot-facing sections (``ingest``, ``push``) are switched off: an evaluation opens
  no ingest and pushes no weights, so it needs none of their tokens.
- ``rlinf eval --policy-server ws://HOST:PORT CONFIG_OR_RUN [--ood id,vision]`` streams a sim env's
  observations to a running policy server and executes the returned chunks: the path a real
  robot uses. The env is the YAML's, or the run directory's stored config's (``eval.env`` when
  set, as ``rlinf train`` evaluates), so the served checkpoint meets the env it was scored on.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)
DEFAULT_VIDEO = "<out>/eval.mp4"
# sections of a stored run config an evaluation never uses, and the values that switch them off:
# an online run's ingest and weight push would otherwise ask for tokens they never send
UNUSED_IN_EVAL: dict[str, dict[str, object]] = {
    "ingest": {"enabled": False, "token_file": None},
    "push": {"url": "", "token_file": None},
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval", help="evaluate a checkpoint, or a running policy server, in simulation"
    )
    p.add_argument(
        "target",
        nargs="?",
        help="run / checkpoint directory, or (with --policy-server) a YAML config naming the "
        "env or a run directory whose config does",
    )
    p.add_argument(
        "overrides", nargs="*", help="key=value overrides of the checkpoint's / config's settings"
    )
    p.add_argument(
        "--checkpoint",
        default=None,
        help="run / checkpoint directory (instead of TARGET, as in rlinf serve)",
    )
    p.add_argument(
        "--policy-server",
        metavar="URL",
        default=None,
        help="ws://HOST:PORT of a running policy server",
    )
    p.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="episodes per split (default: the config's eval.episodes)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="first held-out seed (default: 0, offset by eval.seed_offset)",
    )
    p.add_argument(
        "--ood", default=None, help="comma-separated OOD splits, e.g. id,pose,vision,semantic"
    )
    p.add_argument(
        "--out", default=None, help="output folder (default: <run>/evals/<checkpoint>_seed<S>/)"
    )
    p.add_argument(
        "--video",
        nargs="?",
        const=DEFAULT_VIDEO,
        default=None,
        metavar="PATH",
        help="also render a video (default path: <out>/eval.mp4); off by default",
    )
    p.add_argument("--no-video", action="store_true", help="no video (the default)")
    p.add_argument(
        "--dataset",
        default=None,
        help="LLM checkpoints: jsonl/parquet dataset to score; reward classifiers: episode store",
    )
    p.set_defaults(run=run)


def _report(result: dict, out: Path | None) -> None:
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(text + "\n")
        log.info("eval results: %s", out / "results.json")


def output_dir(checkpoint: Path, seed: int, out: str | None) -> Path:
    """``--out`` or ``<run>/evals/<checkpoint name>_seed<seed>`` (run = the dir above
    ``checkpoints/``)."""
    if out:
        return Path(out)
    run_dir = (
        checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else checkpoint.parent
    )
    return run_dir / "evals" / f"{checkpoint.name}_seed{seed}"


def run(args: argparse.Namespace) -> int:
    from rlinf_cli.errors import PreflightError

    if args.episodes is not None and args.episodes < 1:
        raise PreflightError(f"--episodes must be >= 1, got {args.episodes}")
    _take_video_override(args)
    _resolve_target(args)
    if args.policy_server:
        return _eval_server(args)
    meta = _checkpoint_meta(Path(args.target))
    ckpt = Path(meta["_dir"])
    seed = args.seed if args.seed is not None else 0
    out = output_dir(ckpt, seed, args.out)
    evaluate = EVALUATORS.get(str(meta.get("runner")), _eval_embodied)
    _report({**evaluate(ckpt, args, seed, out), "out_dir": str(out)}, out)
    return 0


def _eval_embodied(ckpt: Path, args: argparse.Namespace, seed: int, out: Path) -> dict:
    """Success per OOD split in the sim env the run trained on (PPO / GRPO, off-policy, offline,
    VLA SFT: every checkpoint that acts)."""
    from learner.eval.embodied import evaluate_checkpoint

    splits = args.ood.split(",") if args.ood else None
    return evaluate_checkpoint(
        str(ckpt),
        episodes=args.episodes,
        seed=seed,
        ood_splits=splits,
        video_path=video_path(args, out),
        overrides=eval_overrides(args.overrides, _read_meta(ckpt).get("config") or {}),
        progress=True,
    )


def video_path(args: argparse.Namespace, out: Path) -> str:
    """The mp4 to write, or "" for none (the default; ``--no-video`` wins over ``--video``)."""
    if args.no_video or args.video is None:
        return ""
    return str(out / "eval.mp4") if args.video == DEFAULT_VIDEO else args.video


def eval_overrides(overrides: list[str], stored: dict) -> dict:
    """The user's ``key=value`` overrides over :data:`UNUSED_IN_EVAL` (only the sections the
    stored config has: another runner's config would refuse an unknown section)."""
    from rlinf_contracts.config import parse_overrides

    off = {k: dict(v) for k, v in UNUSED_IN_EVAL.items() if isinstance(stored.get(k), dict)}
    return _merged(off, parse_overrides(overrides))


def _merged(base: dict, over: dict) -> dict:
    """``over`` onto ``base``, nested sections merged key by key."""
    out = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both else value
    return out


def _take_video_override(args: argparse.Namespace) -> None:
    """``--video key=value``: argparse gave the first override to the optional PATH."""
    if args.video and "=" in args.video and not args.video.endswith(".mp4"):
        args.overrides = [args.video, *args.overrides]
        args.video = DEFAULT_VIDEO


def _eval_llm(ckpt: Path, args: argparse.Namespace, seed: int, out: Path) -> dict:
    """Greedy accuracy on the run's held-out prompts (or ``--dataset``): reasoning and agentic."""
    from learner.eval.llm import evaluate_llm_checkpoint

    return evaluate_llm_checkpoint(str(ckpt), dataset=args.dataset, episodes=args.episodes)


def _eval_classifier(ckpt: Path, args: argparse.Namespace, seed: int, out: Path) -> dict:
    """Accuracy on the run's held-out episodes (or every frame of the ``--dataset`` store)."""
    from learner.eval.classifier import evaluate_classifier_checkpoint

    return evaluate_classifier_checkpoint(str(ckpt), dataset=args.dataset)


# runner recorded in the checkpoint -> its evaluation; every other runner's checkpoint acts in sim
EVALUATORS = {"reasoning": _eval_llm, "reward_classifier": _eval_classifier}


def _resolve_target(args: argparse.Namespace) -> None:
    """``--checkpoint PATH`` or the positional TARGET, exactly one. With ``--checkpoint`` the first
    ``key=value`` word lands in TARGET (argparse fills positionals in order): it is an override."""
    from rlinf_cli.errors import PreflightError

    if args.checkpoint is not None:
        if args.policy_server:
            raise PreflightError(
                "--checkpoint and --policy-server exclude each other: a policy server serves "
                "its own weights"
            )
        if args.target is not None and "=" not in args.target:
            raise PreflightError(
                f"give the checkpoint once: TARGET {args.target!r} and "
                f"--checkpoint {args.checkpoint!r}"
            )
        if args.target is not None:
            args.overrides = [args.target, *args.overrides]
        args.target = args.checkpoint
    if args.target is None:
        raise PreflightError(
            "rlinf eval needs a checkpoint (rlinf eval RUN_DIR, or --checkpoint RUN_DIR) or, with "
            "--policy-server URL, a YAML config naming the env"
        )


def _checkpoint_meta(path: Path) -> dict:
    """meta.json of the checkpoint ``path`` points at: a checkpoint dir, a run's out_dir or its
    checkpoints/ dir (latest iteration), or the checkpoint/ dir of an LLM run written before LLM
    runs used checkpoints/ too. A directory that is not a
    complete checkpoint (unreadable meta.json, another format, no weights) is a user error that
    names the file, not a traceback from deep in the loader."""
    found = next((c for c in (path, path / "checkpoint") if (c / "meta.json").is_file()), None)
    if found is None:
        from learner.checkpoint import resolve_checkpoint

        found = resolve_checkpoint(path)  # raises FileNotFoundError with the layouts it accepts
    return {**_read_meta(found), "_dir": found}


def _read_meta(ckpt: Path) -> dict:
    from learner.checkpoint import FORMAT, MODEL_FILE
    from rlinf_cli.errors import PreflightError

    try:
        meta = json.loads((ckpt / "meta.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PreflightError(
            f"checkpoint {ckpt}: meta.json is unreadable ({e}); was the checkpoint copied whole?"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise PreflightError(
            f"checkpoint {ckpt}: meta.json has format {got!r}, expected {FORMAT!r} "
            "(a checkpoint written by rlinf train)"
        )
    if not (ckpt / MODEL_FILE).is_file():
        raise FileNotFoundError(
            f"checkpoint {ckpt}: {MODEL_FILE} is missing; was the checkpoint copied whole?"
        )
    return meta


def _eval_server(args: argparse.Namespace) -> int:
    """The served policy on the env of a YAML config or of a run directory's stored config
    (``eval.env`` when set, as ``rlinf train`` evaluates), per ``--ood`` split."""
    from types import SimpleNamespace

    from learner.eval.embodied import checkpoint_config, split_kwargs
    from learner.runners.config import EnvConfig, EvalConfig
    from policy_server.sim_eval import run_sim_eval
    from rlinf_cli.preflight import check_env_name, check_ws_url
    from rlinf_contracts.config import from_dict, load_config

    check_ws_url(args.policy_server, "--policy-server", must_listen=True)
    if Path(args.target).is_dir():  # a run / checkpoint directory: the config it was trained with
        meta = _checkpoint_meta(Path(args.target))
        cfg = checkpoint_config(meta, eval_overrides(args.overrides, meta.get("config") or {}))
    else:
        raw = load_config(args.target, args.overrides)
        cfg = SimpleNamespace(
            env=from_dict(EnvConfig, raw.get("env") or {}, path="env"),
            eval=from_dict(EvalConfig, raw.get("eval") or {}, path="eval"),
        )
    name = cfg.eval.env or cfg.env.name
    check_env_name(name)
    episodes = args.episodes or cfg.eval.episodes
    seed = args.seed if args.seed is not None else cfg.eval.seed_offset
    splits = args.ood.split(",") if args.ood else ["id"]
    results = {
        split: run_sim_eval(args.policy_server, name, split_kwargs(cfg, split), episodes, seed)
        for split in splits
    }
    _report(
        results[splits[0]]
        if len(splits) == 1
        else {
            "env": name,
            "splits": results,
            "success_rate": {k: v["success_rate"] for k, v in results.items()},
        },
        Path(args.out) if args.out else None,
    )
    return 0
