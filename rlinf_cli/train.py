"""``rlinf train CONFIG [key=value ...]``: validate the config once, check it, start, run.

Order: build the typed config (unknown keys, types, names resolved at build time) -> the
planning step (``placement: auto`` -> a placement: :func:`learner.scheduling.auto.plan`) -> the
preflight (``rlinf_cli.preflight``: placement against the slots that will exist, env / model
names, paths, addresses, listen ports) -> ``train.out_dir``: one that already holds a run is
refused unless ``train.resume`` continues it (``train.resume=true`` means ``train.out_dir``), or
``--new-run`` moves the run to a fresh ``<out_dir>-YYYYmmdd-HHMMSS`` beside it (``--dry-run``
refuses it the same way: a dry run exists to catch the mistake before a real start, and writes
nothing either way) -> ``--dry-run`` stops here -> a Ray cluster, or none when the runner
says the run is one local process (the fused default) -> the runner -> one summary line on
stdout (``rlinf_cli.summary``). With ``--seeds``, the checks run once here and each seed
is its own ``rlinf train`` process (``rlinf_cli.seeds``), aggregated into ``<out_dir>/seeds.*``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train a policy (embodied RL or LLM reasoning) from a YAML config"
    )
    p.add_argument("config", help="YAML config, e.g. configs/sim_franka_reach_ppo.yaml")
    p.add_argument(
        "overrides", nargs="*", help="key=value overrides, e.g. actor.lr=3e-4 placement.env=0"
    )
    p.add_argument(
        "--ray-address", default=None, help="join an existing Ray cluster instead of embedding one"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="validate, run every pre-start check, print the resolved config, exit",
    )
    p.add_argument(
        "--new-run",
        action="store_true",
        help="train.out_dir already holds a run: write this one to a fresh "
        "<out_dir>-YYYYmmdd-HHMMSS beside it (logged) instead",
    )
    p.add_argument(
        "--seeds",
        default=None,
        metavar="N|S,S,...",
        help="train seeds 0..N-1 (or the listed seeds) of this config, each into "
        "<out_dir>/seed_<k>/, side by side where free cores allow; then write the IQM and 95%% "
        "bootstrap interval of the final held-out and training success to <out_dir>/seeds.json, "
        "seeds.md and seeds.png; exits 1 if any seed failed",
    )
    p.set_defaults(run=run)


def build(config: str, overrides: list[str], ray_address: str | None = None) -> tuple[Any, Any]:
    """(runner spec, typed config) with every pre-start check passed."""
    from learner.scheduling.auto import plan
    from rlinf_cli.preflight import check_train

    spec, cfg = typed_config(config, overrides)
    if ray_address:
        cfg.cluster.address = ray_address
    cfg = plan(cfg)  # placement: auto -> the best predicted placement (profiles, cached)
    check_train(cfg)
    return spec, cfg


def typed_config(config: str, overrides: list[str]) -> tuple[Any, Any]:
    """(runner spec, typed config): the file and overrides validated against the runner's
    config class, nothing checked against this machine and nothing written (``rlinf online``
    runs it before any child starts, to refuse a mistyped key then rather than minutes later)."""
    from rlinf_cli.runner_lookup import runner_spec
    from rlinf_contracts.config import from_dict, load_config
    from rlinf_contracts.config.errors import ConfigError

    raw = load_config(config, overrides)
    resume_here = _take_resume_true(raw)
    # a full-size VLA (configs/vla_*_gpu.yaml): model vla_adapter, checkpoint checked
    if "adapter" in raw:
        from learner.models.vla_adapter_policy import fold_adapter_section

        raw = fold_adapter_section(raw)
    name = raw.get("runner", "embodied")
    if not isinstance(name, str):
        raise ConfigError(f"key 'runner' expects str, got {name!r}")
    spec = runner_spec(name)
    cfg = from_dict(spec.config_cls, raw)
    if resume_here:
        _resume_out_dir(cfg)
    return spec, cfg


def _take_resume_true(raw: dict[str, Any]) -> bool:
    """``train.resume=true`` is shorthand for "resume ``train.out_dir``": taken out of ``raw``
    here (the key itself holds a path) and filled in by :func:`_resume_out_dir`."""
    train = raw.get("train")
    if isinstance(train, dict) and train.get("resume") is True:
        del train["resume"]
        return True
    return False


def _resume_out_dir(cfg: Any) -> None:
    from rlinf_cli.errors import PreflightError

    if not hasattr(cfg.train, "resume"):
        raise PreflightError(
            f"key 'train.resume': runner '{cfg.runner}' cannot resume; start a fresh run with "
            "--new-run or set another train.out_dir"
        )
    cfg.train.resume = cfg.train.out_dir


def new_run_dir(out_dir: str, now: float | None = None) -> str:
    """``<out_dir>-YYYYmmdd-HHMMSS`` (``-2``, ``-3``... when that exists too): the fresh
    directory ``--new-run`` writes to, beside the old one."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = f"{str(out_dir).rstrip('/')}-{stamp}"
    candidate, k = base, 1
    while Path(candidate).exists():
        k += 1
        candidate = f"{base}-{k}"
    return candidate


def place_run(cfg: Any, new_run: bool) -> None:
    """Where this run writes: ``--new-run`` moves it beside the old one; a non-empty out_dir
    without ``train.resume`` is refused, by a dry run too (the same message and fix: a dry run
    that passed must not be followed by a real run that stops here). Nothing is created."""
    from rlinf_cli.errors import PreflightError
    from rlinf_cli.preflight import check_out_dir

    if new_run:
        if getattr(cfg.train, "resume", None):
            raise PreflightError(
                "--new-run starts a fresh run and train.resume continues one: give only one"
            )
        fresh = new_run_dir(cfg.train.out_dir)
        log.info("--new-run: writing this run to %s (beside %s)", fresh, cfg.train.out_dir)
        cfg.train.out_dir = fresh
        return
    check_out_dir(cfg.train)


def open_cluster(spec: Any, cfg: Any) -> Any:
    """No Ray for a one-process local run (when the runner allows it), else embed or join Ray."""
    from learner.cluster import Cluster, InProcess, expected_slots

    slots = expected_slots(cfg.cluster)
    if slots is not None and spec.in_process is not None and spec.in_process(cfg, slots[0]):
        return InProcess(*slots)
    return Cluster.from_config(cfg.cluster)


def run(args: argparse.Namespace) -> int:
    from rlinf_cli.seeds import parse_seeds, run_seeds, seed_plan
    from rlinf_cli.summary import summary_line
    from rlinf_cli.wiring import plug_in
    from rlinf_contracts.config import to_dict

    seeds = None if args.seeds is None else parse_seeds(args.seeds)
    spec, cfg = build(args.config, args.overrides, args.ray_address)
    place_run(cfg, getattr(args, "new_run", False))
    plug_in()
    plan = None
    if seeds is not None:
        plan = seed_plan(args.config, args.overrides, seeds, spec, cfg, args.ray_address)
    if args.dry_run:
        print(json.dumps(to_dict(cfg), indent=2))
        if plan is not None:
            log.info("%s", plan.describe())
        return 0
    if plan is not None:
        return run_seeds(plan)
    cluster = open_cluster(spec, cfg)
    log.info("cluster: %s", cluster.describe())
    try:
        metrics = spec.run(cfg, cluster)
    finally:
        cluster.shutdown()
    log.debug("final metrics: %s", json.dumps(metrics, default=str))
    print(summary_line(cfg, metrics), flush=True)
    return 0
