"""``rlinf spec ENV_OR_CHECKPOINT``: print a robot spec as the YAML a ROS policy client takes.

- ``rlinf spec mujoco_franka/reach [key=value ...]``: the spec of a simulator task (env options as
  overrides, e.g. ``obs_mode=rgb``), i.e. what a policy trained there expects from a robot;
- ``rlinf spec runs/sim_franka_reach_ppo``: the spec a checkpoint carries (what ``rlinf serve``
  announces and checks clients against).

Paste the output under ``policy_client.robot_spec`` of a graph YAML; the test suite checks the
shipped sim-twin config against the simulator in the same way.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import yaml

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "spec",
        help="print the robot spec of an env or a checkpoint (YAML for policy_client.robot_spec)",
    )
    p.add_argument("source", help="env name (family/task) or checkpoint / run directory")
    p.add_argument(
        "options", nargs="*", help="env options as key=value (env names only), e.g. obs_mode=rgb"
    )
    p.set_defaults(run=run)


def _flow_lists(data: dict) -> str:
    """YAML with short lists inline ([name, size] rows), as the shipped configs write them."""

    class Dumper(yaml.SafeDumper):
        pass

    def represent_list(dumper: yaml.SafeDumper, value: list) -> yaml.Node:
        flow = all(not isinstance(v, (dict, list)) for v in value) or all(
            isinstance(v, list) for v in value
        )
        return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)

    Dumper.add_representer(list, represent_list)
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, width=200)


def load_spec(source: str, options: list[str]):
    from rlinf_contracts.config import ConfigError, load_config

    if Path(source).exists():
        if options:
            raise ConfigError("options apply to env names only, not to checkpoints")
        from learner.checkpoint import load_checkpoint, policy_spec_of

        ckpt = load_checkpoint(source)
        return policy_spec_of(ckpt.meta, ckpt.path).robot_spec()
    from rlinf_contracts.env_registry import make_env

    kwargs = load_config(None, options) if options else {}
    env = make_env(source, 1, **kwargs)
    try:
        if env.spec.robot is None:
            raise ConfigError(
                f"env '{source}' declares no robot spec (its state has no named layout)"
            )
        return env.spec.robot
    finally:
        env.close()


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.source, list(args.options))
    print(f"# {spec.describe()}")
    print(_flow_lists({"robot_spec": spec.to_dict()}), end="")
    return 0
