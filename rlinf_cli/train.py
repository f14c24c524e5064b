"""``rlinf train CONFIG [key=value ...]``: validate the config once, start the cluster, run."""

from __future__ import annotations

import argparse
import json
import logging

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a policy (embodied RL or LLM reasoning) from a YAML config")
    p.add_argument("config", help="YAML config, e.g. configs/sim_franka_reach_ppo.yaml")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. actor.lr=3e-4 placement.env=0")
    p.add_argument("--ray-address", default=None, help="join an existing Ray cluster instead of embedding one")
    p.add_argument("--dry-run", action="store_true", help="validate and print the resolved config, then exit")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rlinf_cli.runner_lookup import runner_spec
    from rlinf_contracts.config import from_dict, load_config, to_dict
    from rlinf_contracts.config.errors import ConfigError

    raw = load_config(args.config, args.overrides)
    name = raw.get("runner", "embodied")
    if not isinstance(name, str):
        raise ConfigError(f"key 'runner' expects str, got {name!r}")
    spec = runner_spec(name)
    cfg = from_dict(spec.config_cls, raw)
    if args.ray_address:
        cfg.cluster.address = args.ray_address
    if args.dry_run:
        print(json.dumps(to_dict(cfg), indent=2))
        return 0
    from learner.cluster import Cluster

    cluster = Cluster.from_config(cfg.cluster)
    log.info("cluster: %s", cluster.describe())
    try:
        metrics = spec.run(cfg, cluster)
    finally:
        cluster.shutdown()
    log.info("final metrics: %s", json.dumps(metrics, default=str))
    return 0
